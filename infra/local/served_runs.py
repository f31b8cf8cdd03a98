"""A scenario run on a served stack: ``longstep local run SCENARIO --endpoint-url URL``.

``local run`` alone deploys a stack of its own in a new process: about 8 s of CPU before the first
turn (moto's engine and services imported, the template deployed, the definition parsed), every
time. A developer who edits a tool and runs the scenario again pays that on every edit. A stack
served by ``longstep dev`` or ``local serve`` has paid it once, and picks up edited agent code on
its next invocation (``local/reload.py``): this route runs the scenario there, in the serving
process, and streams the run's lines and its report back to the CLI.

The run starts from the scenario's world, as on a fresh stack: the served stack's tables and its
artifacts bucket are emptied first (``LocalStack.reset_data``), the runs listed so far with them.
One scenario run at a time; the route is a control route (the serve's token, as
``/_longstep/clock``).
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

from longstep.errors import BadRequestError
from longstep.json_input import parse_json
from longstep_kit.local.endpoint_guard import RUN_ROUTE, TOKEN_ENV, TOKEN_HEADER

# What a request may carry, with its type: the scenario's path (on this machine: the CLI and the
# server share the filesystem) and the options of ``local run`` a served stack honours.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "scenario": str,
    "run_id": (str, type(None)),
    "faults": list,
    "restart_at": (int, type(None)),
    "throttle": (int, float),
    "seed": int,
    "approve": str,
}
_APPROVE = ("auto", "reject")  # a served run's approvals: the scenario's decisions, or reject all


class ServedRunError(RuntimeError):
    """The served stack refused or failed the run, or could not be reached; one line.

    Attributes:
        reached: the served stack answered (the run itself was refused or failed).
    """

    def __init__(self, message: str, reached: bool = True) -> None:
        super().__init__(message)
        self.reached = reached


class RunRoute:
    """WSGI middleware: ``POST /_longstep/run`` runs a scenario on ``stack``; every other request
    goes to ``app``.

    Args:
        app: the application behind (moto's, with the clock route).
        stack: the served :class:`~longstep_kit.local.stack.LocalStack`.
    """

    def __init__(self, app: Callable[..., Any], stack: Any) -> None:
        self.app, self.stack = app, stack
        self._busy = threading.Lock()
        self._runs = 0  # served runs so far: each after the first gets an execution name of its own

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") != RUN_ROUTE:
            return self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, "405 Method Not Allowed", {"error": f"{RUN_ROUTE}: use POST"})
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            request = _checked(parse_json(environ["wsgi.input"].read(size) or b"{}", "body"))
        except (ValueError, BadRequestError) as exc:
            return _answer(start_response, "400 Bad Request", {"error": str(exc)})
        if not self._busy.acquire(blocking=False):
            return _answer(start_response, "409 Conflict", {"error": "a scenario run is under way on this served stack; run again when it ends"})
        start_response("200 OK", [("Content-Type", "application/x-ndjson")])
        return self._stream(request)

    def _stream(self, request: dict[str, Any]) -> Iterator[bytes]:
        lines: queue.Queue[dict[str, Any] | None] = queue.Queue()

        def run() -> None:
            try:
                lines.put({"report": self._run(request, lambda line: lines.put({"line": line}))})
            except Exception as exc:  # noqa: BLE001 - told to the CLI in one line, the serve goes on
                lines.put({"error": f"{type(exc).__name__}: {exc}" if not _told(exc) else str(exc)})
            finally:
                lines.put(None)
                self._busy.release()

        threading.Thread(target=run, name="longstep-served-run", daemon=True).start()
        while (item := lines.get()) is not None:
            yield (json.dumps(item) + "\n").encode()

    def _run(self, request: dict[str, Any], emit: Callable[[str], None]) -> dict[str, Any]:
        from longstep_kit.local.faults import parse_fault
        from longstep_kit.local.run_options import RunOptions
        from longstep_kit.local.runner import run_scenario
        from longstep_kit.local.scenario import load_scenario

        scenario = load_scenario(request["scenario"])
        planned = [parse_fault(spec) for spec in request.get("faults", [])]
        self.stack.reset_data()
        self._runs += 1
        run_id = request.get("run_id") or scenario.input.run_id or scenario.name
        emit("the served stack's tables emptied: the run starts from the scenario's world (code as it is now)")
        options = RunOptions(
            approve=request.get("approve", "auto"),
            run_id=run_id,
            # The tables are emptied, the executions stay (as in AWS, a name is not reused for 90 days).
            execution_name=run_id if self._runs == 1 else f"{run_id}-rerun-{self._runs}",
            emit=emit,  # a queue's put: the calls of a Map finish on several threads
            faults=planned,
            restart_at=request.get("restart_at"),
            throttle=float(request.get("throttle", 0.0)),
            seed=request.get("seed", 0),
        )
        with self.stack.clock.skipping():  # a 3-day approval timeout: skipped, as in ``local run``
            return run_scenario(self.stack, scenario, options)


def _told(exc: Exception) -> bool:
    """The errors whose message is already the one line a user should read."""
    from longstep_kit.local.faults import FaultSpecError
    from longstep_kit.local.runner import LocalRunError
    from longstep_kit.local.scenario import ScenarioError
    from longstep_kit.local.world import AgentFunctionNotFoundError

    return isinstance(exc, (FaultSpecError, LocalRunError, ScenarioError, AgentFunctionNotFoundError))


def _checked(request: Any) -> dict[str, Any]:
    if not isinstance(request, dict):
        raise ValueError("body: expected a JSON object")
    for name, value in request.items():
        if name not in _FIELDS:
            raise ValueError(f"{name}: not a field of a served run (fields: {', '.join(_FIELDS)})")
        if not isinstance(value, _FIELDS[name]) or isinstance(value, bool):
            raise ValueError(f"{name}: wrong type ({type(value).__name__})")
    if "scenario" not in request:
        raise ValueError("scenario: required (the scenario file's path)")
    if request.get("approve", "auto") not in _APPROVE:
        raise ValueError(f"approve: {request['approve']!r}: a served run's approvals are one of {', '.join(_APPROVE)}")
    if not all(isinstance(spec, str) for spec in request.get("faults", [])):
        raise ValueError("faults: expected a list of POINT@N strings")
    return request


def _answer(start_response: Callable[..., Any], status: str, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def run_served(
    endpoint_url: str, token: str, request: dict[str, Any], on_line: Callable[[str], None], timeout_seconds: float = 600.0
) -> dict[str, Any]:
    """Run a scenario on the stack served at ``endpoint_url`` and return its report.

    Args:
        endpoint_url: the served stack (``longstep dev`` or ``local serve``).
        token: the serve's control token.
        request: ``scenario`` (an absolute path) and the run's options (``run_id``, ``faults``,
            ``restart_at``, ``throttle``, ``seed``, ``approve``).
        on_line: called with each line of the run's progress, as it comes.
        timeout_seconds: give up if the server says nothing for this long.

    Raises:
        ServedRunError: the server refused the run (one line), failed it, or cannot be reached.
    """
    body = json.dumps({**request, "scenario": str(Path(request["scenario"]).resolve())}).encode()
    http = urllib.request.Request(
        endpoint_url.rstrip("/") + RUN_ROUTE, data=body, headers={"Content-Type": "application/json", TOKEN_HEADER: token}, method="POST"
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout_seconds) as response:  # noqa: S310 - a local endpoint
            for raw in response:
                item = json.loads(raw)
                if "line" in item:
                    on_line(item["line"])
                elif "report" in item:
                    return item["report"]
                else:
                    raise ServedRunError(item.get("error", "the served stack ended the run without a report"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise ServedRunError(f"{endpoint_url} is not a longstep local serve endpoint (no {RUN_ROUTE})", reached=False) from None
        if exc.code == 403:
            raise ServedRunError(f"{endpoint_url} refused: the serve's token is missing or wrong (--token, or {TOKEN_ENV})") from None
        try:
            detail = json.loads(exc.read()).get("error", "")
        except ValueError:
            detail = ""
        raise ServedRunError(f"{endpoint_url}: {detail or exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServedRunError(f"cannot reach {endpoint_url}: {getattr(exc, 'reason', exc)}", reached=False) from None
    raise ServedRunError(f"{endpoint_url} closed the run's stream before its report")
