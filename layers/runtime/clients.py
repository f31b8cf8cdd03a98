"""boto3 clients created on first use and reused across warm invocations, never at import time."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[str, Any] = {}


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
            import boto3

            found = _clients[service] = boto3.client(service, config=config)
        return found


def reset() -> None:
    """Forget every cached client (the local stack calls this when it deploys a fresh account)."""
    with _lock:
        _clients.clear()
