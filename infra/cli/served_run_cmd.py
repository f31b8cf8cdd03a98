"""``longstep local run SCENARIO --endpoint-url URL``: the scenario run on a served stack.

The edit-and-rerun loop: ``longstep dev`` (or ``local serve``) keeps a deployed stack up and picks
up edited agent code on its next invocation; this runs the scenario there instead of deploying a
stack of its own (``longstep_kit.local.served_runs``), and prints what ``local run`` prints: the
run's lines, the summary, the report with ``--report``, the same exit code.
"""

from __future__ import annotations

import argparse
import sys

from longstep_kit.cli.errors import EXIT_AWS, CliError


def add_options(run: argparse.ArgumentParser) -> None:
    """``--token`` on ``local run`` (``--endpoint-url`` is every command's)."""
    run.add_argument(
        "--token",
        help="with --endpoint-url: the serve's control token (default $LONGSTEP_LOCAL_TOKEN; printed by longstep dev and local serve)",
    )


def refused_with_endpoint(args: argparse.Namespace) -> str | None:
    """The first ``local run`` option a served run cannot honour (the served stack's own), or None."""
    for flag, given in (
        ("--serve", args.serve),
        (f"--approve {args.approve}", args.approve not in ("auto", "reject")),
        ("--no-enforce", args.no_enforce),
        ("--agent", bool(args.agent)),
        ("--port", args.port is not None),
        ("--ready-file", args.ready_file is not None),
    ):
        if given:
            return flag
    return None


def run_on_served(args: argparse.Namespace) -> int:
    """Run ``args.scenario`` on the stack served at ``--endpoint-url``; the exit code of ``local run``."""
    from longstep_kit.cli.local_serving import serve_token
    from longstep_kit.cli.run_checks import check_run_flags, check_scenario, planned_faults
    from longstep_kit.cli.run_summary import finish_run
    from longstep_kit.local.progress import line_writer
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.served_runs import ServedRunError, run_served
    from longstep_kit.local.workflow_run import is_workflow_scenario
    from longstep_kit.project import agent_catalog

    url = args.endpoint_url
    flag = refused_with_endpoint(args)
    if flag:
        raise CliError(f"{flag}: not with --endpoint-url (the served stack has its own; a served run's approvals are auto or reject)")
    if is_workflow_scenario(args.scenario):
        raise CliError("--endpoint-url: a workflow's scenario runs on a stack of its own; run it without --endpoint-url")
    token = serve_token(args)
    scenario = check_scenario(args.scenario, {**agent_catalog().references, **load_scenario(args.scenario).agents})
    planned = planned_faults(args, scenario)
    check_run_flags(args, scenario, planned)  # out-of-range flags: refused here, as local run refuses them
    out = sys.stderr if args.report == "-" else sys.stdout
    emit = (lambda line: None) if args.quiet else line_writer(out)
    emit(f"running scenario {scenario.name!r} on the stack served at {url}...")
    request = {
        "scenario": args.scenario,
        "run_id": args.run_id,
        "faults": [*args.fault, *(f"{f.point}@{f.turn}" for f in planned[len(args.fault) :])],  # --faults random:K drawn here
        "restart_at": args.restart_at,
        "throttle": args.throttle,
        "seed": args.seed,
        "approve": args.approve,
    }
    try:
        report = run_served(url, token, request, emit)
    except ServedRunError as exc:
        hint = None if exc.reached else "is `longstep dev` (or `local serve`) running there? check --endpoint-url"
        raise CliError(str(exc), EXIT_AWS, hint) from None
    return finish_run(args, scenario, report)
