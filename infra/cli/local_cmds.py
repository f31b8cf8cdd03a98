"""Commands on the local stack: run a scenario end to end on moto."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from longstep_kit.cli.run_summary import finish_run, who_aborted


def report_failures(stack: Any, report: dict[str, Any], args: argparse.Namespace) -> None:
    """Add the run's failure lines to the report (a failed run): each failed state, its error, where to look."""
    if report["status"] == "SUCCEEDED":
        return
    from longstep_kit.cli.failure_lines import failure_lines
    from longstep_kit.ops import runs
    from longstep_kit.ops.views.history import execution_history

    sfn = stack.client("stepfunctions")
    events = [e for ex in runs.run_executions(sfn, stack.state_machine_arn, report["run_id"]) for e in execution_history(sfn, ex["executionArn"])]
    log = getattr(args, "engine_log", None)
    where = "the report (--report FILE)" + (f"; the engine's log: {log.shown()}" if log is not None and log.written else "")
    lines = failure_lines(events, report["run_id"], where)
    if who_aborted(report, "") != "":  # the local answerer aborted, not a person (the report's cause says so too)
        lines = [line.replace("a human aborted", "the local answerer aborted") for line in lines]
    report["failure_lines"] = lines


def cmd_local_run(args: argparse.Namespace) -> int:
    from longstep_kit.cli.engine_log import EngineLog

    args.engine_log = EngineLog("local-run").start()  # moto's and the engine's messages: not the terminal's
    try:
        return _local_run(args)
    finally:
        args.engine_log.stop()


def _local_run(args: argparse.Namespace) -> int:
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.local.workflow_run import is_workflow_scenario

    if getattr(args, "endpoint_url", None):  # on a served stack (longstep dev): no deploy of its own
        from longstep_kit.cli.served_run_cmd import run_on_served

        return run_on_served(args)
    if args.no_enforce:  # for a workflow's scenario too
        from longstep_kit.local.fidelity import NOT_ENFORCED_WARNING

        print(NOT_ENFORCED_WARNING, file=sys.stderr)
    if is_workflow_scenario(args.scenario):  # a workflow's scenario: its own runner
        from longstep_kit.cli.workflow_cmds import cmd_local_run_workflow

        return cmd_local_run_workflow(args)
    from longstep_kit.cli.run_checks import check_scenario, extra_agents_of
    from longstep_kit.project import agent_catalog

    from longstep_kit.local.scenario import load_scenario

    # The scenario's own extra agents (e.g. a lead and its subagents), then --agent's.
    extra_agents = {**load_scenario(args.scenario).agents, **extra_agents_of(args.agent)}
    agents = {**agent_catalog().references, **extra_agents}
    scenario = check_scenario(args.scenario, agents)  # a ScenarioError exits 2, before deploying
    from longstep_kit.cli.run_checks import check_run_flags, planned_faults

    planned = planned_faults(args, scenario)  # a bad spec exits 2, before deploying

    check_run_flags(args, scenario, planned)  # out-of-range flags and the run id: refused before the deploy
    from longstep_kit.cli.local_serving import RunServing

    from longstep_kit.local import fault_kinds

    kills = any(fault_kinds.kind_of(f.point) == fault_kinds.KILL for f in planned)
    serving = RunServing(args, isolate=kills)  # --serve, --approve external: checked before the deploy
    # --report -: the report is stdout's; progress and summary go to stderr.
    out = sys.stderr if args.report == "-" else sys.stdout
    from longstep_kit.local.progress import line_writer

    emit = None if args.quiet else line_writer(out)  # whole lines: a Map's calls finish on several threads
    if emit:
        emit(f"deploying the stack into moto and running scenario {scenario.name!r}...")
    context = {"longstep": {"agents": agents}} if extra_agents else None
    from contextlib import ExitStack

    with (
        LocalStack(
            context=context, enforce=not args.no_enforce, enforcement_announced=args.no_enforce, clock=serving.clock(), progress=emit
        ) as stack,
        ExitStack() as pages,
    ):
        serving.start(stack)
        page_link = None
        if args.approve == "interactive":  # the approval pages are served, each request's link printed
            from longstep_kit.local.pages_server import PageServer

            page_link = pages.enter_context(PageServer(stack)).decision_link
        if emit and stack.skipped_resources:
            names = ", ".join(t.rsplit("::", 1)[-1] for t in stack.skipped_resources)
            emit(f"note: skipped locally, moto does not emulate them: {names} (docs/local-fidelity.md)")
        options = RunOptions(
            approve=args.approve,
            run_id=args.run_id,
            emit=emit,
            faults=planned,
            restart_at=args.restart_at,
            throttle=args.throttle,
            seed=args.seed,
            page_link=page_link,
            timeout_seconds=serving.timeout_seconds,
        )
        try:
            report = run_scenario(stack, scenario, options)
            report_failures(stack, report, args)
            code = finish_run(args, scenario, report)  # the report and the summary first: nothing after can lose them
            serving.after_run(stack)  # --serve: until Ctrl-C
        finally:
            serving.stop()
    return code


def register(sub: Any) -> None:
    local = sub.add_parser("local", help="run on the local stack (moto, in-process Lambda)").add_subparsers(dest="local_command", required=True)
    run = local.add_parser("run", help="run a scenario file end to end")
    run.add_argument("scenario", help="a scenario file, e.g. events/scenarios/triage.json")
    run.add_argument("--report", metavar="FILE", help="write the JSON report here (- : to stdout; progress and summary then go to stderr)")
    run.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=MODULE:CALLABLE",
        help="also register this agent for the local run, as cdk.json's longstep.agents would (repeatable)",
    )
    run.add_argument(
        "--approve",
        choices=["auto", "reject", "interactive", "external"],
        default="auto",
        help="auto: the scenario's decisions, else approve (default); reject: reject all; interactive: ask, and print "
        "each request's decision page link; external: serve the stack (see --port) and let others decide, "
        "e.g. longstep approve ID --endpoint-url URL",
    )
    run.add_argument("--run-id", help="run id (default: derived from the scenario)")
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    run.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="POINT@N",
        help="crash the invocation at POINT in turn N (repeatable); points: before_model, after_model, "
        "after_record, before_tool, after_effect, after_tool, child_started (a subagent's run was started); or inject permanent@N (a permanent "
        "model error), bad_tool_call@N (a call to an unknown tool), verifier_fail@N",
    )
    run.add_argument("--faults", metavar="random:K", help="inject K distinct faults at random points, reproducibly (see --seed)")
    run.add_argument("--seed", type=int, default=0, help="seed for --faults random:K (default 0)")
    run.add_argument(
        "--throttle",
        type=float,
        default=0.0,
        metavar="RATE",
        help="a fraction (0-1) of model and tool calls fail with a throttling error (reproducible with --seed)",
    )
    run.add_argument("--restart-at", type=int, metavar="N", help="stop the execution when turn N starts, then resume the run")
    run.add_argument(
        "--no-enforce",
        action="store_true",
        help="do not refuse what AWS refuses (IAM, limits, ASL strictness); prints a warning (docs/local-fidelity.md)",
    )
    from longstep_kit.cli import campaign_cmd, eval_cmd, local_serving, serve_cmd

    local_serving.add_run_serving_options(run)
    from longstep_kit.cli import served_run_cmd

    served_run_cmd.add_options(run)
    run.set_defaults(func=cmd_local_run)
    campaign_cmd.register(local)
    eval_cmd.register_local(local)
    serve_cmd.register(local)
    local_serving.register_advance(local)
