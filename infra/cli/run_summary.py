"""What ``longstep local run`` prints when a run ends (on a stack of its own or a served one): the
report where asked, the summary, the unmet expectations; and the exit code."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any


def print_summary(report: dict[str, Any]) -> None:
    from longstep_kit.local.faults import fault_label

    mc, tc, fx = report["model_calls"], report["tool_calls"], report["effects"]
    print(
        f"\n{report['status']}: run {report['run_id']} in {report['turns']} turns, {report['wall_seconds']} s\n"
        f"  model calls {mc['executed']} executed, {mc['replayed']} replayed; "
        f"tool calls {tc['executed']} executed, {tc['replayed']} replayed\n"
        f"  effects: {', '.join(f'{tool} {n}' for tool, n in fx['by_tool'].items()) or 'none listed'}; "
        f"{fx['duplicate_effects']} duplicates"
        + (f" (not counted, no ledger: {', '.join(fx['not_counted'])})" if fx.get("not_counted") else "")
        + "\n"
        f"  {report['lambda_invocations']} Lambda invocations, {report['state_transitions']} state transitions, "
        f"{report['history_events']} history events\n"
        f"  transcript sha256 {report['transcript_sha256']}"
    )
    if any(report.get("attempts", {}).values()):
        print("  failed attempts: " + ", ".join(f"{k} {v}" for k, v in report["attempts"].items()))
    if report.get("faults_injected"):
        fired = ", ".join(fault_label(f, report.get("run_id")) for f in report["faults_injected"])
        print(f"  faults injected: {fired}")
    if report.get("faults_unfired"):
        print(f"  faults that never fired ({len(report['faults_unfired'])}, their step never ran): " + ", ".join(report["faults_unfired"]))
    for esc in report.get("escalations", []):
        answer = (esc.get("resolution") or {}).get("action", "pending")
        print(f"  escalation: turn {esc['turn']} {esc['task']}: {esc['error']} -> {answer}")
    if report.get("output"):
        print(f"  output: {report['output'][:300]}")
    if report["status"] != "SUCCEEDED":
        from longstep_kit.cli.failure_lines import cause_summary

        print(f"  error: {report.get('error')}: {who_aborted(report, cause_summary(report.get('cause')))}")
        for line in report.get("failure_lines", []):
            print(line)


def who_aborted(report: dict[str, Any], cause: str) -> str:
    """The runtime says a human aborted; in a local run, the answerer of ``--approve`` may have
    (``local/report.py``'s ``aborted_cause``)."""
    from longstep_kit.local.report import aborted_cause

    return str(aborted_cause(report, cause))


def fewer_faults_line(spec: str | None, fired: int) -> str | None:
    """``--faults random:K`` that fired fewer than K faults says so (the run ended before their points)."""
    if not spec or not spec.startswith("random:"):
        return None
    try:
        wanted = int(spec.split(":", 1)[1])
    except ValueError:
        return None
    if fired >= wanted:
        return None
    return f"  note: --faults {spec} fired {fired} of {wanted}: the run ended before the other planned points were reached"


def finish_run(args: argparse.Namespace, scenario: Any, report: dict[str, Any]) -> int:
    """Write the report, print the summary and the unmet expectations; the exit code."""
    from longstep_kit.local.scenario import unmet_expectations

    if args.report == "-":
        print(json.dumps(report, indent=2), flush=True)
    elif args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    with contextlib.redirect_stdout(sys.stderr) if args.report == "-" else contextlib.nullcontext():
        print_summary(report)
        short = fewer_faults_line(getattr(args, "faults", None), len(report.get("faults_injected") or []))
        if short:
            print(short)
        unmet = unmet_expectations(scenario.expect, report)
        for line in unmet:
            print(f"  expectation not met: {line}")
    return 1 if unmet else 0
