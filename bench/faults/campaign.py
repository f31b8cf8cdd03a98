"""The fault-kind campaign on triage.json: a zombie at every (point, turn), lost acknowledgements
of every write operation at a spread of indices, and clock skew for each function; each run
compared with the clean run (transcript, effects from the agents' ledgers, 0 duplicates).

``make campaign`` writes ``bench/results/faults_campaign.json``; the suite keeps a few cases.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from longstep import faults
from longstep_kit.local.fault_kinds import LOST_ACK_OPERATIONS
from longstep_kit.local.faults import parse_fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.stack import LocalStack

ROOT = Path(__file__).resolve().parents[2]


def cases(turns: int) -> list[str]:
    """Every zombie point of every turn, lost acknowledgements, skews."""
    zombies = [f"zombie.{p}@{t}" for t in range(turns) for p in faults.POINTS]
    lost = [f"lost_ack.PutItem@{i}" for i in range(0, 48, 4)] + [f"lost_ack.UpdateItem@{i}" for i in range(0, 20, 3)]
    lost += [f"lost_ack.{op}@0" for op in LOST_ACK_OPERATIONS if op not in ("PutItem", "UpdateItem")]
    skews = [f"skew.{task}@{s}" for task in ("model_turn", "call_tool", "request_approval", "finish") for s in (-86400, 3600)]
    return zombies + lost + skews


def main(out: Path) -> int:
    scenario = load_scenario(ROOT / "events" / "scenarios" / "triage.json")
    names = itertools.count()
    rows = []
    with LocalStack() as stack:

        def run(specs: list[str]) -> dict:
            stack.reset_data()
            plan = [parse_fault(s) for s in specs]
            return run_scenario(stack, scenario, RunOptions(run_id="triage", execution_name=f"c{next(names)}", faults=plan, timeout_seconds=120))

        clean = run([])
        for spec in cases(len(scenario.turns)):
            report = run([spec])
            same = (
                report["status"] == "SUCCEEDED"
                and report["transcript_sha256"] == clean["transcript_sha256"]
                and report["effects"] == clean["effects"]
            )
            rows.append(
                {
                    "fault": spec,
                    "fired": bool(report["faults_injected"]),
                    "same_run": same,
                    "duplicates": report["effects"]["duplicate_effects"],
                    "status": report["status"],
                    "cause": report.get("cause"),
                }
            )
    summary = {
        "scenario": "triage",
        "runs": len(rows),
        "fired": sum(r["fired"] for r in rows),
        "fired_and_different": [r for r in rows if r["fired"] and not r["same_run"]],
        "duplicates": sum(r["duplicates"] for r in rows),
        "cases": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['runs']} runs, {summary['fired']} fired, {len(summary['fired_and_different'])} differ, {summary['duplicates']} duplicates")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results" / "faults_campaign.json"))
