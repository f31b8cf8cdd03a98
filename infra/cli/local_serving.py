"""A ``local run`` that others can reach, and ``longstep local advance``.

``local run --approve external`` serves the stack while the run goes on (as ``local serve`` does:
moto's server at ``--port``, time in real time) so that the approvals come from other shells
(``longstep approve ... --endpoint-url``), from the AWS CLI or any SDK. ``local run --serve`` keeps
the stack up after the run, for inspection (``longstep show``, ``runs``, the AWS CLI), until
Ctrl-C. ``longstep local advance 3d`` skips a served stack's virtual clock ahead (the server's
``/_longstep/clock`` route, :mod:`longstep_kit.local.serve`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from longstep_kit.cli.errors import EXIT_AWS, CliError

DEFAULT_ENDPOINT = "http://127.0.0.1:4566"
REMOTE_WARNING = (
    "WARNING: serving on {host}, not a loopback address: anyone who can reach it can drive the stack "
    "(read the link-signing key, approve, start runs, read checkpoints) with any AWS SDK; only the "
    "control routes need the token"
)


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback ``--host`` unless ``--allow-remote`` (checked before the deploy).

    Raises:
        CliError: ``host`` is not loopback and ``allow_remote`` is not set.
    """
    from longstep_kit.local.endpoint_guard import is_loopback

    if not is_loopback(host) and not allow_remote:
        raise CliError(
            f"--host {host}: not a loopback address; the stack would answer anyone who can reach it",
            hint="serve on 127.0.0.1, or pass --allow-remote to serve there anyway",
        )


def check_port_free(host: str, port: int, option: str = "--port") -> None:
    """Refuse a port something already listens on, before the deploy (seconds) rather than after it.

    Raises:
        CliError: ``host:port`` is taken (or not a port).
    """
    import socket

    if not 0 < port < 65536:
        raise CliError(f"{option}: must be 1-65535, got {port}")
    with socket.socket() as probe:
        if probe.connect_ex((host, port)) == 0:
            raise CliError(f"{option} {port}: {host}:{port} is in use", hint=f"pass another {option}, or stop what listens there")


def serving_lines(url: str, token: str, host: str) -> list[str]:
    """What a served stack prints about its door: the token, and the warning of a remote bind."""
    from longstep_kit.local.endpoint_guard import TOKEN_ENV, is_loopback

    lines = [f"  control token (longstep local advance --token, or {TOKEN_ENV}): {token}"]
    if not is_loopback(host):
        lines.insert(0, REMOTE_WARNING.format(host=host))
    return lines


# A run whose approvals come from people is not bounded by the 5 minutes a scripted run gets.
EXTERNAL_TIMEOUT_SECONDS = 7 * 86_400


class RunServing:
    """What ``--serve`` and ``--approve external`` ask of a ``local run``.

    Args:
        args: the parsed ``local run`` arguments.

    Raises:
        CliError: ``--time-scale`` is not positive, or ``--port`` is not a port (checked before
            the deploy).
    """

    def __init__(self, args: argparse.Namespace, isolate: bool = False) -> None:
        # A planned kill.TASK@N: the Lambdas run in worker processes, which reach the stack over
        # HTTP, so the stack is served (on a free loopback port when not asked to be).
        self.isolate = isolate
        self.external = args.approve == "external"
        self.serve_after = bool(args.serve)
        self.wanted = self.external or self.serve_after
        self.host, self.ready_file = args.host, args.ready_file
        check_host(args.host, args.allow_remote)
        self.port = 4566 if args.port is None else args.port
        self.time_scale = args.time_scale
        if not (self.time_scale > 0 and self.time_scale != float("inf")):
            raise CliError(f"--time-scale: must be a positive number, got {args.time_scale}")
        if not 0 < self.port < 65536:
            raise CliError(f"--port: must be 1-65535, got {args.port}")
        if self.wanted:
            check_port_free(self.host, self.port)
        if not self.wanted and (args.ready_file or args.port is not None):
            raise CliError("--port and --ready-file serve the stack: add --serve or --approve external")
        self._server: Any = None
        self._ticker: Any = None

    def clock(self) -> Any:
        """The stack's clock: served, it starts at the wall clock's now, as ``local serve``'s does
        (other processes compare the stack's timestamps, an approval's expiry, with their own time)."""
        from longstep_kit.local.clock import VirtualClock

        return VirtualClock(start=time.time()) if self.wanted else VirtualClock()

    @property
    def timeout_seconds(self) -> float:
        return EXTERNAL_TIMEOUT_SECONDS if self.external else 300.0

    def start(self, stack: Any) -> None:
        """Serve ``stack`` now (before the run) when asked; with external approvals, in real time."""
        if not self.wanted and not self.isolate:
            return
        from longstep_kit.local.serve import LocalServer, ServeError, free_port

        if self.external:
            self._real_time(stack)
        rate = self.time_scale if self.external else 0.0  # in real time, time moves inside an invocation too
        if self.wanted:
            self._server = LocalServer(stack, host=self.host, port=self.port, isolate_lambdas=self.isolate, clock_rate=rate)
        else:
            self._server = LocalServer(stack, port=free_port(), isolate_lambdas=True)
        try:
            self._server.start()
        except ServeError as exc:
            self.stop()
            raise CliError(str(exc)) from None
        if not self.wanted:
            return
        url = self._server.endpoint_url
        print(f"serving stack {stack.assembly.stack_name} at {url}", flush=True)
        for line in serving_lines(url, self._server.token, self.host):
            print(line, flush=True)
        if self.external:
            print(f"  approvals come from outside: longstep approvals --endpoint-url {url} --stack {stack.assembly.stack_name}", flush=True)
        if self.ready_file:  # tests and scripts wait for this file instead of parsing output
            Path(self.ready_file).write_text(json.dumps({"endpoint_url": url, "token": self._server.token, "outputs": stack.outputs}))

    def after_run(self, stack: Any) -> None:
        """With ``--serve``: keep serving, in real time, until Ctrl-C (the report is out already)."""
        if not self.serve_after:
            return
        self._real_time(stack)
        url = self._server.endpoint_url
        from longstep_kit.local.serve import wait_until_stopped

        print(
            f"\nthe stack stays up at {url} (Ctrl-C to stop); e.g. longstep runs --endpoint-url {url} --stack {stack.assembly.stack_name}", flush=True
        )
        try:
            wait_until_stopped()
        except KeyboardInterrupt:  # the way to stop it: not an error
            print("stopped", flush=True)

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        if self._server is not None:
            self._server.stop()
            self._server = None

    def _real_time(self, stack: Any) -> None:
        from longstep_kit.local.serve import RealTime

        if self._ticker is None:
            self._ticker = RealTime(stack.clock, self.time_scale)
            self._ticker.start()


def add_run_serving_options(run: argparse.ArgumentParser) -> None:
    """``--serve``, ``--port``, ``--host``, ``--time-scale``, ``--ready-file`` on ``local run``."""
    run.add_argument(
        "--serve", action="store_true", help="serve the stack at --port during the run and keep it up afterwards, for inspection, until Ctrl-C"
    )
    run.add_argument("--port", type=int, default=None, help="port to serve at with --serve or --approve external (default 4566)")
    run.add_argument("--host", default="127.0.0.1", help="address to serve at (default 127.0.0.1)")
    run.add_argument(
        "--allow-remote", action="store_true", help="served: allow a --host that is not a loopback address (anyone reaching it can drive the stack)"
    )
    run.add_argument("--time-scale", type=float, default=1.0, metavar="N", help="served: virtual seconds per real second (default 1: real time)")
    run.add_argument("--ready-file", metavar="FILE", help="served: write the endpoint and the stack outputs here once serving")


def serve_token(args: argparse.Namespace) -> str:
    """The serve's control token: ``--token``, else ``$LONGSTEP_LOCAL_TOKEN``.

    Raises:
        CliError: neither is set.
    """
    from longstep_kit.local.endpoint_guard import TOKEN_ENV

    token = args.token or os.environ.get(TOKEN_ENV, "")
    if not token:
        raise CliError(
            f"--token: the serve's control token is required (printed by `longstep local serve` and `longstep dev`, in its ready file; or set {TOKEN_ENV})"
        )
    return token


# -- longstep local advance ----------------------------------------------------------------------


def cmd_local_advance(args: argparse.Namespace) -> int:
    from longstep_kit.local.serve import ServeError, advance_served
    from longstep_kit.ops.views import InspectError
    from longstep_kit.ops.views.status import parse_age

    try:
        seconds = parse_age(args.duration)
    except InspectError as exc:
        raise CliError(f"DURATION: {exc}") from None
    url = args.aws.endpoint_url or DEFAULT_ENDPOINT
    token = serve_token(args)
    try:
        moved = advance_served(url, seconds, token, timeout_seconds=args.timeout)
    except ServeError as exc:
        raise CliError(str(exc), EXIT_AWS, "is `longstep local serve` (or `local run --serve`) running? check --endpoint-url") from None
    if getattr(args, "output", "text") == "json":
        print(json.dumps(moved))
    else:
        import datetime as dt

        when = dt.datetime.fromtimestamp(moved["now"], dt.timezone.utc).isoformat(timespec="seconds")
        print(f"advanced {args.duration} ({moved['now'] - moved['before']:.0f} s): the stack's clock is at {when}")
    return 0


def register_advance(local: Any) -> None:
    advance = local.add_parser(
        "advance",
        help="skip a served local stack's virtual clock ahead",
        description="Skip the virtual clock of a stack served by `longstep local serve` (or `local run --serve`) "
        "ahead: the waits, timeouts and TTLs due meanwhile fire in order. Example: longstep local advance 3d "
        "--endpoint-url http://127.0.0.1:4566",
    )
    advance.add_argument("duration", metavar="DURATION", help="how far, e.g. 90s, 30m, 2h, 3d, 1h30m")
    advance.add_argument("--token", help="the serve's control token (default $LONGSTEP_LOCAL_TOKEN; printed by local serve, in its ready file)")
    advance.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="give up waiting for the server after this long (default 300)"
    )
    advance.set_defaults(func=cmd_local_advance)
