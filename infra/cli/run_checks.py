"""``local run``'s flags checked against the scenario before the deploy (which takes seconds; the
scenario and its agent are checked first, by ``check_scenario``):
a value that could never take effect is refused in one line, exit code 2, instead of being
accepted and silently never firing."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from longstep_kit.cli.errors import CliError


def check_run_flags(args: argparse.Namespace, scenario: Any, planned: list[Any]) -> str:
    """Refuse flag values that are out of range for ``scenario``.

    Args:
        args: the parsed ``local run`` arguments.
        scenario: the loaded scenario.
        planned: the parsed ``--fault``/``--faults`` values.

    Returns:
        The run id the run will have.

    Raises:
        CliError: one line naming the flag and the allowed range.
    """
    from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE

    turns = sorted(scenario.turns)
    scripted = f"the scenario scripts turns {turns[0]}-{turns[-1]}" if turns else "the scenario scripts no turns"
    throttle = args.throttle
    if math.isnan(throttle) or not 0.0 <= throttle <= 1.0:
        raise CliError(f"--throttle: must be a fraction of calls between 0 and 1, got {throttle:g}")
    if args.restart_at is not None and args.restart_at not in scenario.turns:
        raise CliError(f"--restart-at: turn {args.restart_at} never runs ({scripted})")
    run_id = args.run_id or scenario.input.run_id or scenario.name
    if not RUN_ID_PATTERN.fullmatch(run_id):
        where = "--run-id" if args.run_id else "the scenario's run id (pass --run-id)"
        raise CliError(f"{where}: {run_id!r} {RUN_ID_RULE}")
    runs = _scripted_runs(scenario)  # the parent ("") and every child run, by its run id's tail
    from longstep_kit.local import fault_kinds

    kills = [f for f in planned if fault_kinds.kind_of(f.point) == fault_kinds.KILL]
    others = [f for f in planned if fault_kinds.kind_of(f.point) != fault_kinds.KILL]
    if kills and (others or args.restart_at is not None or throttle):
        what = f"--fault {others[0].point}@{others[0].turn}" if others else ("--restart-at" if args.restart_at is not None else "--throttle")
        raise CliError(f"{what}: not with a kill.TASK@N fault: the Lambdas then run in worker processes, which this run's other faults do not reach")

    for fault in planned:
        if fault_kinds.kind_of(fault.point) in (fault_kinds.LOST_ACK, fault_kinds.SKEW, fault_kinds.KILL):
            continue  # N counts requests (or seconds), not turns; the target names a table, not a run
        spec = f"--fault {fault.point}@{fault.turn}" + (f":{fault.run}" if fault.run else "")
        if fault.run is None:  # whichever run gets there first: any run's turn will do
            if not any(fault.turn in turns for turns in runs.values()):
                raise CliError(f"{spec}: turn {fault.turn} never runs in this run or its child runs ({scripted})")
            continue
        tail = fault.run.removeprefix(run_id).lstrip("-")
        if tail not in runs:
            children = ", ".join(sorted(t for t in runs if t)) or "none"
            raise CliError(f"{spec}: the run never starts a run {fault.run!r} (its child runs: {children})")
        if fault.turn not in runs[tail]:
            raise CliError(f"{spec}: turn {fault.turn} never runs in {fault.run!r} (it scripts turns {sorted(runs[tail])})")
    return run_id


def _scripted_runs(scenario: Any) -> dict[str, set[int]]:
    """The scripted turns of the scenario's run ("") and of each child run, by the tail of its run
    id (``t0c1``, a grandchild ``t0c1-t1c0``: ``longstep.subagents.child_run_id``)."""
    runs: dict[str, set[int]] = {"": set(scenario.turns)}

    def walk(prefix: str, subagents: dict[str, Any]) -> None:
        for key, child in subagents.items():
            tail = f"{prefix}-{key}" if prefix else key
            runs[tail] = set(child.turns)
            walk(tail, child.subagents)

    walk("", getattr(scenario, "subagents", {}) or {})
    return runs


def extra_agents_of(specs: list[str]) -> dict[str, str]:
    """``--agent NAME=module:callable`` values as a ``longstep.agents`` mapping.

    Raises:
        ScenarioError: a value is not NAME=module:callable.
    """
    from longstep.references import REFERENCE
    from longstep_kit.local.scenario import ScenarioError

    out = {}
    for spec in specs:
        name, sep, ref = spec.partition("=")
        if not sep or not name or not REFERENCE.match(ref):
            raise ScenarioError(f"--agent {spec!r}: expected NAME=module:callable, e.g. invoice=agents.invoice:build")
        out[name] = ref
    return out


def check_scenario(path: str, agents: dict[str, str]) -> Any:
    """The scenario, checked on its own and against its agent as the project registers it.

    Raises:
        ScenarioError: one line naming the file and the field.
    """
    from longstep.agents import AgentCatalog
    from longstep.errors import UnknownAgentError
    from longstep_kit.local.scenario import ScenarioError, check_against_agent, load_scenario

    scenario = load_scenario(path)
    try:
        agent = AgentCatalog(agents)(scenario.input.agent)
    except UnknownAgentError as exc:
        raise ScenarioError(f"{path}: input.{exc}") from None
    check_against_agent(scenario, agent, path)
    from longstep_kit.agent_warnings import unprobed_warnings  # not app.py: its import starts the CDK

    for line in unprobed_warnings(agent):  # said before the run, not after a crash lands on it
        print(line, file=sys.stderr)
    return scenario


def planned_faults(args: argparse.Namespace, scenario: Any) -> list[Any]:
    """``--fault`` and ``--faults random:K`` (drawn with ``--seed`` over the scenario's turns), parsed.

    Raises:
        CliError: a fault spec that does not parse (one line).
    """
    from longstep_kit.local.faults import FaultSpecError, parse_fault, random_faults

    try:
        planned = [parse_fault(spec) for spec in args.fault]
        if args.faults:
            planned += random_faults(args.faults, args.seed, len(scenario.turns))
    except FaultSpecError as exc:
        raise CliError(str(exc)) from None
    return planned
