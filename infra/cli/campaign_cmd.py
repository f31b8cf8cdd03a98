"""``longstep local campaign SCENARIO``: the scenario clean, with a crash at every fault point of
every turn, at random seeds and with restarts, each run compared with the clean one; one table, one
summary line, JSON with ``--json``; exit 1 on any difference or duplicate effect."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from longstep import faults


def _ints(value: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag} {value!r}: expected comma-separated integers, e.g. 1,2,3") from None


def _points(value: str) -> tuple[str, ...]:
    points = tuple(p.strip() for p in value.split(",") if p.strip())
    unknown = [p for p in points if p not in faults.POINTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"--points: unknown point {unknown[0]!r}; the points are {', '.join(faults.POINTS)}")
    return points


def _line(row: dict[str, Any]) -> str:
    if row["status"] == "ERROR":
        return f"  {row['case']:<22} could not finish: {row['error']}"
    fired = "fired" if row["fired"] else "not fired"
    same = "same run" if row["same_run"] else "DIFFERS"
    duplicates = row["duplicates"]
    dup = "0 duplicates" if not duplicates else f"{duplicates} DUPLICATE effect{'s' if duplicates > 1 else ''}"
    return f"  {row['case']:<22} {fired:<10} {same:<9} {dup:<22} {row['status']}"


def cmd_local_campaign(args: argparse.Namespace) -> int:
    from longstep_kit.cli.engine_log import EngineLog

    log = EngineLog("local-campaign").start()  # moto's and the engine's messages: not the terminal's
    try:
        return _campaign(args)
    finally:
        log.stop()


def _campaign(args: argparse.Namespace) -> int:
    from longstep_kit.cli.run_checks import check_scenario, extra_agents_of
    from longstep_kit.local.campaign import CampaignPlan, run_campaign
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.local.workflow_run import is_workflow_scenario
    from longstep_kit.project import agent_catalog

    if is_workflow_scenario(args.scenario):
        print(f"error: {args.scenario}: a workflow's scenario; a campaign runs an agent's (make campaign covers the workflows)", file=sys.stderr)
        return 2
    extra_agents = {**load_scenario(args.scenario).agents, **extra_agents_of(args.agent)}
    scenario = check_scenario(args.scenario, {**agent_catalog().references, **extra_agents})  # bad input: exit 2, before deploying
    turns = len(scenario.turns)
    out_of_range = [t for t in args.turns or () if not 0 <= t < turns]
    if out_of_range:
        print(f"error: --turns {out_of_range[0]}: the scenario has turns 0 to {turns - 1}", file=sys.stderr)
        return 2
    plan = CampaignPlan(
        points=args.points or faults.POINTS, turns=args.turns or None, seeds=() if args.no_random else args.seeds, restarts=not args.no_restarts
    )
    cases = plan.cases(scenario)
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    say(f"campaign {scenario.name}: the clean run and {len(cases)} with faults, each on a wiped world; deploying the stack into moto...")
    context = {"longstep": {"agents": {**agent_catalog().references, **extra_agents}}} if extra_agents else None
    with LocalStack(context=context) as stack:
        result = run_campaign(stack, scenario, plan, case_timeout=args.case_timeout, on_row=lambda row: say(_line(row)))
    if result.unfired:
        say(f"not fired (the run never reached that point): {', '.join(result.unfired)}")
    for row in result.differ:
        say(f"differs: {row['case']}: {row.get('error') or row.get('cause') or 'not the clean run (its transcript or effects)'}")
    for row in result.rows:
        for tool, keys in (row.get("duplicated") or {}).items():
            for key, n in keys.items():
                print(f"duplicate: {row['case']}: {tool} ran {n} times for one call ({key})")
    if args.json:
        Path(args.json).write_text(json.dumps(result.as_dict(), indent=1, default=str) + "\n")
    print(result.summary())
    return 0 if result.passed else 1


def register(local: Any) -> None:
    """``longstep local campaign``, beside ``local run``."""
    campaign = local.add_parser(
        "campaign",
        help="run a scenario clean and under every fault point of every turn, random faults and restarts; count duplicate effects",
        description=__doc__,
    )
    campaign.add_argument("scenario", help="an agent's scenario file, e.g. events/scenarios/triage.json")
    campaign.add_argument("--agent", action="append", default=[], metavar="NAME=MODULE:CALLABLE", help="also register this agent (repeatable)")
    campaign.add_argument("--points", type=_points, metavar="P,Q", help=f"only these fault points (default: every one: {', '.join(faults.POINTS)})")
    campaign.add_argument(
        "--turns", type=lambda v: _ints(v, "--turns"), metavar="N,M", help="only crash and restart at these turns (default: every turn)"
    )
    campaign.add_argument(
        "--seeds", type=lambda v: _ints(v, "--seeds"), default=(1, 2, 3), metavar="A,B", help="a run with 6 random crashes per seed (default 1,2,3)"
    )
    campaign.add_argument("--no-random", action="store_true", help="no random runs")
    campaign.add_argument("--no-restarts", action="store_true", help="no restart runs")
    campaign.add_argument("--case-timeout", type=float, default=180.0, metavar="SECONDS", help="a run gives up after this long (default 180)")
    campaign.add_argument("--json", metavar="FILE", help="write every row and the verdict here")
    campaign.add_argument("--quiet", action="store_true", help="print only duplicates and the summary line")
    campaign.set_defaults(func=cmd_local_campaign)
