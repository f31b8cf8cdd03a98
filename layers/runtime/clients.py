"""boto3 clients created on first use and reused across warm invocations, never at import time."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_factory: Callable[[str], Any] | None = None


def client(service: str, config: Any = None) -> Any:
    """The shared boto3 client for ``service`` (region and credentials from the environment).

    Args:
        service: the boto3 service name.
        config: a ``botocore.config.Config`` for the client; a service's callers pass the same one
            (the first call creates the client).
    """
    with _lock:
        found = _clients.get(service)
        if found is None:
            if _factory is not None:
                found = _clients[service] = _factory(service)
            else:
                import boto3

                found = _clients[service] = boto3.client(service, config=config)
            # botocore builds a client's exception classes on first use, and its cache of them
            # is a check-then-set: two threads of one warm process (the local stack runs a
            # function's concurrent invocations as threads) could each build a set, so that an
            # ``except client.exceptions.X`` missed the X the other set raised. Built here, once.
            _ = getattr(found, "exceptions", None)
        return found


def reset() -> None:
    """Forget every cached client (the local stack calls this when it deploys a fresh account)."""
    with _lock:
        _clients.clear()


@contextlib.contextmanager
def made_by(factory: Callable[[str], Any]) -> Iterator[None]:
    """Inside the block, clients come from ``factory`` (service name -> client).

    For an agent's own code run by an operator outside Lambda (seeding a world, reading a tool's
    ledger on a deployed stack from a laptop): the operator's session and endpoint, not the
    process environment's. The clients cached before the block are back after it.
    """
    global _factory
    with _lock:
        saved, previous = dict(_clients), _factory
        _clients.clear()
        _factory = factory
    try:
        yield
    finally:
        with _lock:
            _clients.clear()
            _clients.update(saved)
            _factory = previous
