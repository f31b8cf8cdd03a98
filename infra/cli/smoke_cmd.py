"""``longstep smoke``: prove the kit on an account in one command.

It runs the shipped scenarios (``events/scenarios/*.json``) on the local stack first, for the
reference reports; then deploys a throwaway copy of the stack (its own name, every table and the
bucket destroyed with it), runs the same scenarios there through the real Step Functions (see
``cli/smoke.py``), compares each report with the local one (status, transcript hash, no duplicate
effect), prints a table, and tears the copy down, on Ctrl-C or failure too. ``--endpoint-url``
runs against a stack ``longstep local serve`` serves instead (nothing is deployed or torn down).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from longstep_kit.cli.errors import EXIT_RUN_FAILED, CliError

SCENARIO_GLOB = "events/scenarios/*.json"
CRASH_AFTER_STEPS = 4  # the crashed run: stopped once it has recorded this many steps, then resumed
PAUSE_AT_TURN = 2  # the paused run: paused once it has recorded this many model turns
# Waits longer than this cannot run on an account in a smoke test (they can on a local server:
# its clock is skipped ahead).
MAX_REAL_WAIT_SECONDS = 900


def cmd_smoke(args: argparse.Namespace) -> int:
    from longstep_kit.cli.engine_log import EngineLog

    log = EngineLog("smoke").start()  # moto's messages of the reference runs: not the terminal's
    try:
        return _smoke(args)
    finally:
        log.stop()


def _smoke(args: argparse.Namespace) -> int:
    from longstep_kit.cli.smoke import Plan

    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731 - progress on stderr, the table on stdout
    chosen = _scenarios(args.scenario)
    served = args.aws.endpoint_url is not None
    deployed = _served_agents(args.aws) if served else None
    runnable, skipped = [], []
    for path, scenario in chosen:
        why = _why_not(scenario, served, deployed)
        (skipped.append((scenario.name, why)) if why else runnable.append(scenario))
    if not runnable:
        raise CliError("--scenario: nothing to run here (" + "; ".join(f"{n}: {w}" for n, w in skipped) + ")")
    tag = secrets.token_hex(3)
    run_ids = {s.name: f"smoke-{s.name.replace('_', '-')}-{tag}" for s in runnable}
    plans = {s.name: Plan() for s in runnable}
    first = next((s for s in runnable if s.name == "triage"), next((s for s in runnable if s.approvals), runnable[0]))
    plans[first.name] = Plan(crash_after=CRASH_AFTER_STEPS, pause_at=PAUSE_AT_TURN)
    agents = _agents(runnable)
    started = time.monotonic()
    say(f"smoke: {len(runnable)} scenarios ({', '.join(s.name for s in runnable)}); local reference runs first")
    expected = _reference(runnable, run_ids, agents, say)
    say(f"smoke: reference runs done ({time.monotonic() - started:.0f} s)")
    rows: list[dict[str, Any]] = []
    with _target(args, agents, say) as stack:
        for scenario in runnable:
            rows.append(_one(stack, scenario, run_ids[scenario.name], plans[scenario.name], expected[scenario.name], args.timeout, say))
    rows += [{"scenario": name, "result": "SKIP", "why": why} for name, why in skipped]
    _print(args, rows)
    failed = [r for r in rows if r["result"] == "FAIL"]
    say(f"smoke: {len(rows) - len(failed) - len(skipped)} passed, {len(failed)} failed, {len(skipped)} skipped ({time.monotonic() - started:.0f} s)")
    return EXIT_RUN_FAILED if failed else 0


def _scenarios(paths: list[str] | None) -> list[tuple[str, Any]]:
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.workflow_run import is_workflow_scenario
    from longstep_kit.project import find_project

    if paths:
        files = [Path(p) for p in paths]
    else:
        files = sorted((find_project() / "events" / "scenarios").glob("*.json"))
        if not files:
            raise CliError(f"no scenarios: {SCENARIO_GLOB} is empty (pass --scenario FILE)")
    out = []
    for path in files:
        if is_workflow_scenario(str(path)):
            out.append((str(path), _Workflow(path.stem)))
            continue
        out.append((str(path), load_scenario(path)))  # a bad file: one line, exit 2, before anything is deployed
    return out


class _Workflow:
    """A workflow's scenario: listed in the table as skipped (smoke drives agent runs)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _served_agents(aws: Any) -> set[str]:
    """The agents the served stack has a CallTool function for."""
    from longstep.resources import ENV_AGENT
    from longstep_kit.local.resources import CALL_TOOL_HANDLER

    found = set()
    for page in aws.client("lambda").get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            if fn.get("Handler") == CALL_TOOL_HANDLER:
                found.add(((fn.get("Environment") or {}).get("Variables") or {}).get(ENV_AGENT))
    return found


def _why_not(scenario: Any, served: bool, deployed: set[str] | None = None) -> str | None:
    """Why the scenario cannot run on this target (None: it can)."""
    if isinstance(scenario, _Workflow):
        return "a workflow's scenario (smoke drives agent runs)"
    if served:
        missing = sorted({scenario.input.agent, *scenario.agents} - (deployed or set()))
        return f"agent {', '.join(missing)} not on the served stack (local serve deploys cdk.json's agents)" if missing else None
    longest = _longest_wait(scenario)
    if longest > MAX_REAL_WAIT_SECONDS:
        return f"waits {longest / 3600:.0f} h of real time (run it with --endpoint-url against local serve, whose clock skips ahead)"
    return None


def _longest_wait(scenario: Any) -> float:
    """The longest wall-clock wait the scenario holds: timers, waits that time out, approvals nobody answers."""
    from longstep_kit.config import DeploymentConfig

    signalled = {s.event for s in scenario.signals}
    longest = 0.0
    for turn in scenario.turns.values():
        for call in turn.tool_calls:
            if call.name != "wait_for":
                continue
            if "seconds" in call.input:
                longest = max(longest, float(call.input["seconds"]))
            elif call.input.get("event") not in signalled:
                longest = max(longest, float(call.input.get("timeout_seconds", 0)))
    if any(d.decision == "timeout" for d in scenario.approvals.values()):
        longest = max(longest, DeploymentConfig().approval_timeout_hours * 3600.0)
    return longest


def _agents(scenarios: list[Any]) -> dict[str, str]:
    extra: dict[str, str] = {}
    for scenario in scenarios:
        extra.update(scenario.agents)
    return extra


def _reference(scenarios: list[Any], run_ids: dict[str, str], agents: dict[str, str], say: Any) -> dict[str, dict[str, Any]]:
    """Each scenario's local run, in the same order on one local stack (the world accumulates the same way)."""
    from longstep.store import CheckpointStore
    from longstep_kit.cli.smoke import transcript_hashes
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.project import agent_catalog

    context = {"longstep": {"agents": {**agent_catalog().references, **agents}}} if agents else None
    out = {}
    with LocalStack(context=context, progress=say) as stack:
        for scenario in scenarios:
            report = run_scenario(stack, scenario, RunOptions(run_id=run_ids[scenario.name]))
            store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
            report["transcript_clock_free_sha256"] = transcript_hashes(store, run_ids[scenario.name])[1]
            out[scenario.name] = report
            say(f"  local {scenario.name}: {report['status']} transcript {report['transcript_sha256'][:12]}")
    return out


def _one(stack: Any, scenario: Any, run_id: str, plan: Any, expected: dict[str, Any], timeout: float, say: Any) -> dict[str, Any]:
    from longstep_kit.cli.smoke import SmokeError, run_on_stack

    row: dict[str, Any] = {"scenario": scenario.name, "run_id": run_id, "expected_status": expected["status"]}
    started = time.monotonic()
    try:
        got = run_on_stack(stack, scenario, run_id, plan, timeout, say)
    except SmokeError as exc:
        return {**row, "result": "FAIL", "why": str(exc), "seconds": round(time.monotonic() - started)}
    problems = []
    if got["status"] != expected["status"]:
        problems.append(
            f"status {got['status']}, locally {expected['status']}" + (f" ({got.get('error')}: {got.get('cause')})" if got.get("error") else "")
        )
    if got["transcript_clock_free_sha256"] != expected["transcript_clock_free_sha256"]:
        problems.append(
            f"transcript {got['transcript_clock_free_sha256'][:12]}, locally {expected['transcript_clock_free_sha256'][:12]} (clock readings masked)"
        )
    duplicates = got["effects"]["duplicate_effects"]
    if duplicates != scenario.expect.duplicate_effects:
        problems.append(f"{duplicates} duplicate effects ({json.dumps(got['effects']['duplicates'])})")
    extras = [name for name, done in (("crash+resume", got["crashed_and_resumed"]), ("pause+resume", got["paused_and_resumed"])) if done]
    if plan.crash_after is not None and not got["crashed_and_resumed"]:
        problems.append("the planned crash did not happen (the run ended first)")
    if plan.pause_at is not None and not got["paused_and_resumed"]:
        # Said, not failed: a run with nothing to wait on may end between two looks.
        extras.append("pause not tried (the run ended first)")
    return {
        **row,
        "result": "FAIL" if problems else "PASS",
        "status": got["status"],
        "transcript": got["transcript_clock_free_sha256"][:12],
        "transcript_exact_equal": got["transcript_sha256"] == expected["transcript_sha256"],
        "duplicates": duplicates,
        "also": ", ".join(extras),
        "seconds": round(time.monotonic() - started),
        "why": "; ".join(problems),
    }


def _print(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    if getattr(args, "output", "text") == "json":
        print(json.dumps(rows, indent=2))
        return
    header = ["SCENARIO", "RESULT", "STATUS", "TRANSCRIPT", "DUPLICATES", "ALSO", "SECONDS", "WHY"]
    table = [
        [
            r["scenario"],
            r["result"],
            r.get("status", ""),
            r.get("transcript", ""),
            str(r.get("duplicates", "")),
            r.get("also", ""),
            str(r.get("seconds", "")),
            r.get("why", ""),
        ]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


class _target:  # noqa: N801 - used as a context manager, like contextlib's
    """The stack the runs go to: the served one (``--endpoint-url``), or a throwaway deploy torn down on exit."""

    def __init__(self, args: argparse.Namespace, agents: dict[str, str], say: Any) -> None:
        self.args, self.agents, self.say = args, agents, say
        self.deployed: Any = None

    def __enter__(self) -> Any:
        from longstep_kit.cli.smoke import DeployedStack

        args = self.args
        if args.aws.endpoint_url is not None:
            import os

            from longstep_kit.local.endpoint_guard import TOKEN_ENV

            outputs = args.aws.stack_outputs(args.stack)
            pages = args.pages_url or _next_port(args.aws.endpoint_url)
            return DeployedStack(args.aws, args.stack, outputs, args.token or os.environ.get(TOKEN_ENV) or None, pages)
        from longstep_kit.cli.smoke_deploy import Throwaway

        self.deployed = Throwaway(args.aws, self.agents, self.say, keep=args.keep)
        try:
            outputs = self.deployed.deploy()
        except BaseException:  # a failed or interrupted deploy is torn down too
            self.deployed.tear_down()
            raise
        return DeployedStack(args.aws, self.deployed.stack_name, outputs, None, args.pages_url or outputs.get("ApprovalApiUrl"))

    def __exit__(self, *exc: Any) -> None:
        if self.deployed is not None:
            self.deployed.tear_down()


def _next_port(endpoint_url: str) -> str:
    """``local serve``'s approval pages: the endpoint's port + 1 unless ``--pages-port`` moved them."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint_url)
    if parts.port is None:
        raise CliError(f"--endpoint-url {endpoint_url}: no port; pass --pages-url")
    return f"{parts.scheme}://{parts.hostname}:{parts.port + 1}/v1/"  # the stage, as local/pages_server.py serves it


def register(sub: Any) -> None:
    p = sub.add_parser(
        "smoke",
        help="prove the kit on an account: deploy a throwaway stack, run the shipped scenarios, compare, tear down",
        description="Run the shipped scenarios locally for reference, then on a throwaway copy of the stack "
        "(own name, the scripted model: no Bedrock, cents), compare each report (status, transcript hash, "
        "duplicate effects), print a table and tear the copy down (on Ctrl-C or failure too). With "
        "--endpoint-url, against `longstep local serve` instead. Example: longstep smoke --profile sandbox --region eu-west-1",
    )
    p.add_argument("--scenario", action="append", metavar="FILE", help=f"a scenario to run (repeatable; default {SCENARIO_GLOB})")
    p.add_argument("--stack", default="Longstep", help="with --endpoint-url: the served stack's name (default Longstep)")
    p.add_argument("--pages-url", help="the approval pages (default: the stack's ApprovalApiUrl; served: the endpoint's port + 1)")
    p.add_argument(
        "--token", help="with --endpoint-url: the serve's control token, to skip its clock over long waits (default $LONGSTEP_LOCAL_TOKEN)"
    )
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="give up on a run after this long (default 600)")
    p.add_argument("--keep", action="store_true", help="leave the throwaway stack deployed (to look at it; `cdk destroy` it yourself)")
    p.set_defaults(func=cmd_smoke)
