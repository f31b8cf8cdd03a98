"""``longstep eval RUN|EXPORT... --change SCENARIO``: counterfactuals of recorded runs under a change,
with no real effect, what each did differently, and the set's table (docs/evals.md).
``longstep local eval SCENARIO --change SCENARIO``: the same on a fresh local stack, the record made
by running the first scenario there, and the world's tables compared before and after the eval.

Exit codes: 0 the eval ran (whatever it found), 1 ``--gate`` and the change adds or removes an
effect (or the eval run escalated, or did not end in ``--timeout``), 2 bad input (an unknown run, a bad scenario,
a turn the record does not have), 3 AWS or configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Iterator

from longstep_kit.cli.errors import EXIT_OK, EXIT_RUN_FAILED, CliError


def cmd_eval(args: argparse.Namespace) -> int:
    from longstep.artifacts import ArtifactStore
    from longstep.pinning import alias_arn, unqualified
    from longstep.store import CheckpointStore
    from longstep_kit.cli.aws_cmds import stack_output
    from longstep_kit.ops import runs
    from longstep_kit.ops.export import export_run

    change = _change(args.change)  # a bad scenario is refused before AWS is asked anything
    if args.run_id and len(args.runs) > 1:
        raise CliError("--run-id: names one eval run; give one RUN, or none (each eval run is then RUN-eval<K>)")
    store = CheckpointStore(stack_output(args, "CheckpointTableName"), args.aws.client("dynamodb"))
    artifacts = ArtifactStore(stack_output(args, "ArtifactBucketName"), args.aws.client("s3"))
    sfn = args.aws.client("stepfunctions")
    arn = args.state_machine_arn or alias_arn(stack_output(args, "StateMachineArn"))  # on the deploy alias, as `longstep start`
    recorded = []
    for run in args.runs:  # every record read first: a bad one is refused before any eval starts
        if Path(run).suffix == ".json" or Path(run).is_file():
            from longstep_kit.cli.replay_cmd import load_export

            exported, status = load_export(run), None
        else:
            exported = export_run(store, artifacts, run)
            try:
                status = runs.latest_execution(sfn, unqualified(arn), run)["status"]
            except runs.RunNotFoundError:
                status = None
        if any(str(exported.get("name")) == str(other.get("name")) for other, _ in recorded):
            raise CliError(f"RUN: run {exported.get('name')} is given twice")
        recorded.append((exported, status))
    reports = [evaluate(args, store, artifacts, sfn, arn, exported, change, status) for exported, status in recorded]
    if args.output == "json":
        print(json.dumps([r.to_json() for r in reports], indent=2, default=str))
    else:
        from longstep_kit.ops.eval_report import render_table, render_text

        print("\n".join(render_text(r, gate=args.gate) for r in reports))
        if len(reports) > 1:
            print(render_table(reports))
    return EXIT_RUN_FAILED if args.gate and not all(r.gate_passed for r in reports) else EXIT_OK


def cmd_local_eval(args: argparse.Namespace) -> int:
    from longstep_kit.cli.engine_log import EngineLog

    with EngineLog("local-eval"):  # moto's and the engine's messages: not the terminal's
        return _local_eval(args)


def _local_eval(args: argparse.Namespace) -> int:
    from longstep.artifacts import ArtifactStore
    from longstep.store import CheckpointStore
    from longstep_kit.cli.run_checks import check_scenario
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.ops.export import export_run
    from longstep_kit.project import agent_catalog

    agents = _agents(args.scenario)  # a scenario's own agents (a lead and its subagents) too, as `local run`'s
    scenario = check_scenario(args.scenario, agents)
    change = _change(args.change, agents)
    plan = _crash_plan(args.faults, args.seed, max(change.turns) + 1)  # a bad --faults: refused before the deploy
    say = (lambda line: print(line, file=sys.stderr)) if args.output == "json" else print
    say(f"deploying the stack into moto, running scenario {scenario.name!r} for the record, then the eval...")
    with LocalStack(context={"longstep": {"agents": agents}} if agents != agent_catalog().references else None) as stack:
        recorded = run_scenario(stack, scenario, RunOptions(run_id=args.record_run_id))
        store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
        artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
        before = world_items(stack, scenario.input.agent)
        exported = export_run(store, artifacts, recorded["run_id"])
        with crashes(stack, plan) as injected:
            report = evaluate(args, store, artifacts, stack.client("stepfunctions"), stack.alias_arn, exported, change, recorded["status"])
        after = world_items(stack, scenario.input.agent)
    world = {
        "tables": len(before),
        "items_before": sum(map(len, before.values())),
        "items_after": sum(map(len, after.values())),
        "unchanged": before == after,
        "crashes": [f"{c['point']}@{c['turn']}" for c in injected],
    }
    return _print(args, {**report.to_json(), "world": world}, report, world)


def _crash_plan(spec: str | None, seed: int, turns: int) -> list[Any]:
    """``--faults random:K``: K crashes at step boundaries of the eval run's turns, the same for a seed."""
    from longstep_kit.local.faults import FaultSpecError, random_faults

    if not spec:
        return []
    try:
        return random_faults(spec, seed, turns)
    except FaultSpecError as exc:
        raise CliError(str(exc)) from None


@contextlib.contextmanager
def crashes(stack: Any, plan: list[Any]) -> Iterator[list[dict[str, Any]]]:
    """Crash the eval run's invocations at the planned step boundaries (it recovers as any run
    does); yields the list of the crashes that fired, filled as they do."""
    from longstep.steps import RecordLease
    from longstep_kit.local.faults import FaultInjector

    injector = FaultInjector(plan=list(plan), lock=RecordLease, dispatcher=stack.dispatcher, lambda_client=lambda: stack.client("lambda"))
    injector.install()
    try:
        yield injector.injected
    finally:
        injector.uninstall()


def evaluate(
    args: argparse.Namespace, store: Any, artifacts: Any, sfn: Any, arn: str, exported: dict[str, Any], change: Any, recorded_status: str | None
) -> Any:
    """Start the eval run of ``exported`` under ``change``, wait for its end, and compare it with the record."""
    from longstep_kit.ops.eval_report import compare
    from longstep_kit.ops.evals import start_eval
    from longstep_kit.ops.export import export_run
    from longstep_kit.testing.wait import WaitTimeoutError, wait_until

    if change.input.agent != exported["input"]["agent"]:
        raise CliError(f"{args.change}: input.agent: {change.input.agent!r} is not the recorded run's agent {exported['input']['agent']!r}")
    turns = {str(t): reply.model_dump(exclude_none=True) for t, reply in change.turns.items()}
    started = start_eval(store, artifacts, sfn, arn, exported, turns, at_turn=args.at_turn, approvals=args.approvals, run_id=args.run_id)
    try:
        ended = wait_until(f"eval run {started.run_id} to end", lambda: _ended(store, sfn, started), args.timeout)
    except WaitTimeoutError:
        raise CliError(f"--timeout: eval run {started.run_id} still running after {args.timeout:g} s", EXIT_RUN_FAILED) from None
    return compare(exported, export_run(store, artifacts, started.run_id), started.at_turn, ended["status"], recorded_status)


def _ended(store: Any, sfn: Any, started: Any) -> dict[str, Any] | None:
    """The eval run's execution once it has ended; None while it runs.

    Raises:
        CliError: it escalated (a step failed for good): it is stopped, since an eval asks nobody.
    """
    from longstep.humans.escalations import pending_escalations

    described = sfn.describe_execution(executionArn=started.execution_arn)
    if described["status"] != "RUNNING":
        return described
    for pending in pending_escalations(store, started.run_id):
        sfn.stop_execution(executionArn=started.execution_arn, error="EvalEscalated", cause=pending["reason"][:200])
        where = f"turn {pending['turn']} {pending['task']}"
        raise CliError(
            f"eval run {started.run_id} escalated at {where}: {pending['error']}: {pending['reason']}; stopped (an eval asks nobody)", EXIT_RUN_FAILED
        )
    return None


def world_items(stack: Any, agent: str) -> dict[str, list[str]]:
    """Every item of the agent's own tables on the local stack, by table (canonical JSON, sorted)."""
    from longstep_kit.local.resources import agent_tables
    from longstep_kit.testing.tables import agent_items

    return {name: sorted(json.dumps(i, sort_keys=True, default=str) for i in agent_items(stack, agent, name)) for name in agent_tables(stack, agent)}


def _change(path: str, agents: dict[str, str] | None = None) -> Any:
    """The change: a scenario file whose scripted replies stand in for the new model, checked
    against its agent (among ``agents``, default the project's and those the scenario names)."""
    from longstep_kit.cli.run_checks import check_scenario

    return check_scenario(path, agents or _agents(path))


def _agents(path: str) -> dict[str, str]:
    """The project's agents and those the scenario registers for a local run (its ``agents``)."""
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.project import agent_catalog

    return {**agent_catalog().references, **load_scenario(path).agents}


def _print(args: argparse.Namespace, data: dict[str, Any], report: Any, world: dict[str, Any] | None = None) -> int:
    from longstep_kit.ops.eval_report import render_text

    if args.output == "json":
        print(json.dumps(data, indent=2, default=str))
    else:
        print(render_text(report, gate=args.gate))
        if world is not None:
            state = "unchanged" if world["unchanged"] else "CHANGED"
            print(
                f"  world: {world['items_before']} items in the agent's {world['tables']} tables before the eval, {world['items_after']} after: {state}"
            )
            if world["crashes"]:
                print(f"  crashes injected into the eval run: {', '.join(world['crashes'])}")
    return EXIT_RUN_FAILED if args.gate and not report.gate_passed else EXIT_OK


def _add_eval_options(parser: argparse.ArgumentParser, recorded: tuple[str, str], *, on_stack: bool) -> None:
    """The options of both commands: the recorded run (``recorded``: its argument's name and help),
    the change, the fork point, the approval policy, the gate; the stack's with ``on_stack``."""
    parser.add_argument(recorded[0], help=recorded[1], metavar="RUN" if on_stack else "SCENARIO", nargs="+" if on_stack else None)
    parser.add_argument("--change", required=True, metavar="SCENARIO", help="a scenario whose scripted replies stand in for the changed model")
    parser.add_argument("--at-turn", type=int, default=0, help="the first turn under the change; earlier turns replay the record (default 0)")
    parser.add_argument(
        "--approvals",
        choices=("approve", "reject", "withhold"),
        default="withhold",
        help="a call needing an approver that the record did not make: approve (then a read runs, another effect is withheld), reject, or withhold (default)",
    )
    parser.add_argument("--gate", action="store_true", help="exit 1 when the change adds an effect the record did not have or removes one it had")
    parser.add_argument("--run-id", help="the eval run's id (default RUN-eval<N>)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the eval run to end (default 300)")
    if on_stack:
        parser.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
        parser.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")
    else:
        parser.add_argument("--record-run-id", help="the recorded run's id (default: the scenario's)")
        parser.add_argument("--faults", metavar="random:K", help="crash the eval run at K random step boundaries, reproducibly (see --seed)")
        parser.add_argument("--seed", type=int, default=0, help="seed for --faults random:K (default 0)")


def register(sub: Any) -> None:
    ev = sub.add_parser(
        "eval",
        help="run a recorded run again under a change (a scripted model), with no real effect, and report what differs",
        description="A counterfactual eval of a recorded run: tool calls are answered from the record; reads it lacks run live; "
        "any other effect is withheld and reported. Exit 0: the eval ran; 1: --gate and the effects differ; 2: bad input.",
    )
    _add_eval_options(ev, ("runs", "run ids on the stack, or `longstep export` files (each evaluated in turn)"), on_stack=True)
    ev.set_defaults(func=cmd_eval)


def register_local(local: Any) -> None:
    """``longstep local eval``, beside ``local run``."""
    ev = local.add_parser("eval", help="run a scenario for the record, then an eval of it under a change, on a fresh local stack")
    _add_eval_options(ev, ("scenario", "the scenario whose run is the record, e.g. events/scenarios/triage.json"), on_stack=False)
    ev.set_defaults(func=cmd_local_eval)
