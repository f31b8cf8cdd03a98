"""``longstep local serve``: the local stack behind an endpoint, for the CLI, the AWS CLI and SDKs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def cmd_local_serve(args: argparse.Namespace) -> int:
    from longstep_kit.cli.engine_log import EngineLog

    args.engine_log = EngineLog("local-serve").start()  # moto's messages and the request log: not the terminal's
    try:
        return _serve(args)
    finally:
        args.engine_log.stop()


def _serve(args: argparse.Namespace) -> int:
    from longstep_kit.cli.errors import CliError
    from longstep_kit.local.serve import LocalServer, ServeError, wait_until_stopped
    from longstep_kit.local.stack import LocalStack

    scenario = None
    if args.scenario:
        from longstep_kit.local.scenario import load_scenario

        scenario = load_scenario(args.scenario)  # a bad scenario fails before the deploy
    if not 0 < args.time_scale < float("inf"):
        raise CliError(f"--time-scale: must be positive, got {args.time_scale}")
    from longstep_kit.cli.local_serving import check_host, check_port_free, serving_lines

    check_host(args.host, args.allow_remote)
    check_port_free(args.host, args.port)  # before the deploy, not after it
    check_port_free(args.host, args.pages_port if args.pages_port is not None else args.port + 1, "--pages-port")
    if args.run_id is not None:
        from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE

        if not RUN_ID_PATTERN.fullmatch(args.run_id):
            raise CliError(f"--run-id: {args.run_id!r} {RUN_ID_RULE}")
    import time

    from longstep_kit.local.clock import VirtualClock

    print("deploying the stack into moto...", flush=True)
    # The clock starts at the wall clock's now: other processes (the CLI deciding an approval)
    # compare the stack's timestamps with their own time.
    # Hot reload: an edited tool runs on the next invocation, announced here (local/reload.py).
    with LocalStack(clock=VirtualClock(start=time.time()), progress=lambda line: print(line, flush=True), hot_reload=True) as stack:
        # Real time by default: a 7-day approval timeout waits 7 days, as a person deciding
        # expects. The virtual clock's skipping is off and a ticker moves it at --time-scale
        # virtual seconds per real second.
        ticker = _RealTime(stack.clock, args.time_scale)
        ticker.start()
        server = LocalServer(stack, host=args.host, port=args.port, isolate_lambdas=args.isolate_lambdas, clock_rate=args.time_scale)
        try:
            server.start()
        except ServeError as exc:
            raise CliError(str(exc)) from None
        # The approval pages: the approval API's function behind a small local server (local/pages_server.py).
        from longstep_kit.local.pages_server import PageServer

        pages = PageServer(stack, host=args.host, port=args.pages_port if args.pages_port is not None else args.port + 1)
        try:
            pages.start()
        except OSError as exc:
            ticker.stop()
            server.stop()
            raise CliError(f"--pages-port: cannot listen on {args.host}:{pages.port} ({exc.strerror or exc})") from None
        ui = None
        try:
            url = server.endpoint_url
            if getattr(args, "ui", False):
                ui = start_ui(stack, url, args.host, args.ui_port)
                print(f"run UI: {ui.url}  (open this; Ctrl-C stops everything)", flush=True)
            print(f"serving stack {stack.assembly.stack_name} at {url} (Ctrl-C to stop)")
            print("  hot reload: edited agent code runs on the next invocation; runs in progress continue")
            rerun = args.scenario or "SCENARIO.json"
            print(f"  edit, then rerun a scenario here in seconds: longstep local run {rerun} --endpoint-url {url} --token {server.token}")
            print(f"  approval pages: {pages.url}pages/... (the stack's ApprovalApiUrl: every link to it opens here)")
            named = f" --stack {stack.assembly.stack_name}"
            print(f"  humans: longstep approvals --endpoint-url {url}{named} (and escalations); each new request and escalation is printed here")
            stack.dispatcher.after_invoke.append(_link_printer(stack, pages.url, f"--endpoint-url {url}{named}"))
            print(f"  state machine: {stack.state_machine_arn}")
            print(f"  engine log: {args.engine_log.shown()} (moto's messages and failed requests; the stack lives in memory until Ctrl-C)")
            for line in serving_lines(url, server.token, args.host):
                print(line)
            if ui is None:
                print(f"  run UI: longstep ui --endpoint-url {url}{named} (or serve it here: longstep dev)")
            payload = _prepare(stack, scenario, args.run_id, args.input_out, url) if scenario is not None else None
            print(f"  try: longstep runs --endpoint-url {url}{named}", flush=True)
            if args.ready_file:  # tests and scripts wait for this file instead of parsing output
                ready = {"endpoint_url": url, "pages_url": pages.url, "token": server.token, "outputs": stack.outputs}
                Path(args.ready_file).write_text(json.dumps(ready))
            if payload is not None and getattr(args, "start", False):
                start_scenario_run(stack, payload)
            wait_until_stopped()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: how a served stack is meant to end, not an error
            print("stopped", flush=True)
        finally:
            if ui is not None:
                ui.close()
            pages.stop()
            ticker.stop()
            server.stop()
    return 0


def _RealTime(clock: Any, scale: float) -> Any:  # noqa: N802 - the ticker moved to local/serve.py
    from longstep_kit.local.serve import RealTime

    return RealTime(clock, scale)


def _prepare(stack: Any, scenario: Any, run_id: str | None, out: str | None, url: str) -> dict[str, Any]:
    """Check the scenario against its agent, seed its world, upload its script, and write a start input for it."""
    from longstep_kit.local.runner import start_input
    from longstep_kit.local.world import check_and_seed

    check_and_seed(stack, scenario, scenario.name)
    payload = start_input(stack, scenario, run_id or scenario.input.run_id or scenario.name)
    path = Path(out or f"{payload['run_id']}.start.json")
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"  scenario {scenario.name!r}: world seeded, script uploaded; start it with:")
    # The stack's name: a project made by `longstep init` names its own (the default is Longstep).
    print(f"    longstep start --input {path} --endpoint-url {url} --stack {stack.assembly.stack_name}")
    return payload


def start_ui(stack: Any, endpoint_url: str, host: str, port: int) -> Any:
    """The run UI on the served stack, in a thread of this process (its requests go to the stack's endpoint).

    Raises:
        CliError: the UI's port is taken.
    """
    from longstep_kit.cli.aws import Aws
    from longstep_kit.cli.errors import CliError
    from longstep_kit.cli.ui_cmd import backend_of
    from longstep_kit.ui.server import UiBindError, UiServer

    args = argparse.Namespace(
        aws=Aws(None, None, endpoint_url),
        stack=stack.assembly.stack_name,
        state_machine_arn=None,
        checkpoint_table=None,
        approvals_table=None,
    )
    try:
        return UiServer(backend_of(args), host, port, log=lambda line: print(line, file=sys.stderr, flush=True)).start()
    except UiBindError as exc:
        raise CliError(f"--ui-port: {exc}") from None


def start_scenario_run(stack: Any, payload: dict[str, Any]) -> str:
    """Start the prepared scenario's run on the stack's alias and print its steps as they happen.

    Returns:
        The execution's ARN.
    """
    import json

    from longstep_kit.local.progress import line_writer, printer

    stack.dispatcher.after_invoke.append(printer(line_writer()))
    started = stack.client("stepfunctions").start_execution(stateMachineArn=stack.alias_arn, name=payload["run_id"], input=json.dumps(payload))
    print(f"  started run {payload['run_id']}: its steps follow here and in the run UI", flush=True)
    return started["executionArn"]


def register(local: Any) -> None:
    serve = local.add_parser(
        "serve",
        help="deploy the stack into moto and serve it at a local endpoint",
        description="Deploy the stack into moto and serve it at a local endpoint until Ctrl-C. The longstep CLI "
        "(--endpoint-url), the AWS CLI and any AWS SDK can use it from other shells; edited agent code runs on the next "
        "invocation. Example: longstep local serve --scenario events/scenarios/triage.json",
    )
    add_serve_options(serve)
    serve.set_defaults(func=cmd_local_serve)


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    """The options of a served stack (``local serve`` and ``dev``)."""
    serve.add_argument("--port", type=int, default=4566, help="port to listen on (default 4566)")
    serve.add_argument("--pages-port", type=int, default=None, help="port of the approval pages (default: --port + 1)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--allow-remote", action="store_true", help="allow a --host that is not a loopback address (anyone reaching it can drive the stack)"
    )
    serve.add_argument("--scenario", help="seed this scenario's world and upload its script, e.g. events/scenarios/triage.json")
    serve.add_argument("--run-id", help="run id for the scenario's start input (default: the scenario's)")
    serve.add_argument("--input-out", metavar="FILE", help="where to write the scenario's start input (default RUN_ID.start.json)")
    serve.add_argument(
        "--time-scale", type=float, default=1.0, metavar="N", help="virtual seconds per real second for waits and timeouts (default 1: real time)"
    )
    serve.add_argument("--ready-file", metavar="FILE", help="write the endpoint and the stack outputs here once serving")
    serve.add_argument(
        "--isolate-lambdas",
        action="store_true",
        help="run each Lambda invocation in a worker process (a sandbox that can be killed mid-write) instead of a thread of this one",
    )


def _link_printer(stack: Any, pages_url: str, target: str = "") -> Any:
    """A dispatcher hook printing each new approval request with its decision page's link, and
    each new escalation with its run's inbox link and the command that answers it: the person at
    this terminal can act at once (the links are signed with the stack's key, as the
    notifications' links are)."""
    from longstep import links
    from longstep.humans.notifications import decision_link, run_inbox_link
    from longstep.humans.requests import get_approval
    from longstep.humans.table import ApprovalTable

    def ring() -> Any:
        return links.keyring_from_secret(stack.client("secretsmanager"), stack.outputs["LinkKeySecretArn"])

    def hook(inv: Any) -> None:
        result = inv.result if inv.error is None and isinstance(inv.result, dict) else {}
        if inv.task == "escalate" and result.get("status") == "pending":
            _announce_escalation(inv, result, lambda run_id: run_inbox_link(pages_url, ring(), run_id, subject="local serve"), target)
            return
        if inv.task != "request_approval" or result.get("status") != "pending":
            return
        try:
            view = get_approval(ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb")), result["approval_id"])
            link = decision_link(pages_url, ring(), view, subject="local serve")
        except Exception as exc:  # noqa: BLE001 - a link not printed must not stop the run
            print(f"  approval requested: run {result.get('run_id')} (no link: {type(exc).__name__})", flush=True)
            return
        print(f"  approval requested: run {view['run_id']} turn {view['turn']} call {view['call']} {view['tool']}: {link}", flush=True)

    return hook


def _announce_escalation(inv: Any, result: dict[str, Any], inbox: Any, target: str) -> None:
    """``escalated: run R turn T STEP: ERROR: MESSAGE``, then where to answer it."""
    item = inv.event.get("item") if isinstance(inv.event, dict) else None
    error = item.get("error") if isinstance(item, dict) and isinstance(item.get("error"), dict) else {}
    from longstep_kit.cli.failure_lines import cause_summary

    why = f"{error.get('Error', 'error')}: {cause_summary(error.get('Cause'), 240)}"
    run_id = result.get("run_id")
    print(f"  escalated: run {run_id} turn {result.get('turn')} {result.get('task')}: {why}", flush=True)
    if "converse action has not been implemented" in why:
        from longstep_kit.cli.local_model import SCRIPTED_MODEL_HINT

        print(f"    {SCRIPTED_MODEL_HINT}", flush=True)
    try:
        link = inbox(run_id)
    except Exception as exc:  # noqa: BLE001 - a link not printed must not stop the run
        link = f"(no link: {type(exc).__name__})"
    where = f"{result.get('turn')}" + (f" --call {item['call']}" if isinstance(item, dict) and isinstance(item.get("call"), int) else "")
    print(f"    answer it: {link}, or longstep resolve {run_id} {where} --retry|--skip JSON|--abort {target}".rstrip(), flush=True)
