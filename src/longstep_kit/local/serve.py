"""The local stack behind an endpoint: moto's server mode in this process, the handlers in-process.

``LocalStack`` deploys the synthesized template into moto's in-memory backends and routes Lambda
invokes to the real handlers; ``LocalServer`` puts moto's HTTP server in front of the same
backends, so that the ``longstep`` CLI (``--endpoint-url``), the AWS CLI and any AWS SDK in other
shells start executions, list them, decide approvals and send signals exactly as against AWS.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from longstep_kit.local.stack import LocalStack

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4566


class ServeError(RuntimeError):
    """The server could not start (the port is taken, for one)."""


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nothing listens on right now (for tests)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, timeout_seconds: float) -> None:
    """Return once ``host:port`` accepts connections.

    Raises:
        ServeError: it did not within ``timeout_seconds``.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ServeError(f"nothing answers on {host}:{port} after {timeout_seconds:.0f} s") from None
            time.sleep(0.05)


@dataclass
class LocalServer:
    """moto's server in front of a started :class:`LocalStack`.

    Args:
        stack: the local stack (started).
        host: the address to listen on (loopback by default: the stack holds no real data, but
            it answers anyone who can reach it).
        port: the port.
    """

    stack: LocalStack
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    _server: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_seconds: float = 30.0) -> None:
        """Listen (moto's backends are the stack's: the server and the handlers share them).

        Raises:
            ServeError: the port is in use, or the server did not come up.
        """
        from moto.server import ThreadedMotoServer

        with socket.socket() as probe:
            if probe.connect_ex((self.host, self.port)) == 0:
                raise ServeError(f"port {self.port} on {self.host} is in use (pass --port)")
        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        wait_for_port(self.host, self.port, timeout_seconds)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
