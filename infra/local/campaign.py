"""A fault campaign on one agent scenario (``longstep local campaign``): the scenario run clean,
then with a crash at every fault point of every turn that has it, with random crashes at several
seeds, and with a restart at every turn; every run compared with the clean one (status, effects
counted from the agents' own ledgers, transcript) and its duplicate effects counted.

The bench's campaign (``bench/faults/campaign.py``) adds the zombie, throttling, lost-acknowledgement
and clock-skew kinds to these cases and runs every shipped scenario.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep_kit.local.faults import Fault, random_faults
from longstep_kit.local.run_options import RunOptions
from longstep import faults

# Where a crash can be injected, in the order a turn reaches them: before_model, after_model,
# after_record (the model's reply recorded), before_tool, after_effect (the tool acted, its result
# not yet recorded), after_tool.
FAULT_POINTS = faults.POINTS
DEFAULT_SEEDS = (1, 2, 3)
RANDOM_FAULTS = 6  # crashes a random case plans: ``random:6``


@dataclass(frozen=True)
class Case:
    """One run of a campaign: its label (``after_effect@3``, ``random seed 2``, ``restart at 4``),
    the crashes it plans and the turn it restarts at."""

    label: str
    faults: tuple[Fault, ...] = ()
    restart_at: int | None = None


@dataclass(frozen=True)
class CampaignPlan:
    """What a campaign runs besides the clean run.

    Attributes:
        points: the fault points crashed at (default: every one, ``longstep.faults.POINTS``).
        turns: the turns crashed and restarted at (default: every turn of the scenario).
        seeds: one run with ``random:6`` crashes per seed.
        restarts: a run that restarts its execution at each turn.
    """

    points: tuple[str, ...] = FAULT_POINTS
    turns: tuple[int, ...] | None = None
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    restarts: bool = True

    def cases(self, scenario: Any) -> list[Case]:
        """The cases for ``scenario``: a crash at each point of each turn that has it (the tool
        points only on turns whose reply calls a tool), the random seeds, the restarts."""
        every = range(len(scenario.turns))
        turns = [t for t in (self.turns if self.turns is not None else every) if t in every]
        tool_turns = {t for t, turn in scenario.turns.items() if turn.tool_calls}
        model_points = {faults.BEFORE_MODEL, faults.AFTER_MODEL, faults.AFTER_RECORD}
        out = [Case(f"{p}@{t}", (Fault(p, t),)) for t in turns for p in self.points if p in model_points or t in tool_turns]
        out += [Case(f"random seed {s}", tuple(random_faults(f"random:{RANDOM_FAULTS}", s, len(scenario.turns)))) for s in self.seeds]
        if self.restarts:
            out += [Case(f"restart at {t}", restart_at=t) for t in turns if t > 0]
        return out


@dataclass
class CampaignResult:
    """A campaign's rows (the clean run's first) and its verdict."""

    scenario: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def differ(self) -> list[dict[str, Any]]:
        """The runs whose faults fired and that did not give the clean run."""
        return [r for r in self.rows[1:] if r["fired"] and not r["same_run"]]

    @property
    def duplicates(self) -> int:
        return sum(r["duplicates"] or 0 for r in self.rows)

    @property
    def unfired(self) -> list[str]:
        """Cases whose faults never fired (the run never reached that point)."""
        return [r["case"] for r in self.rows[1:] if not r["fired"]]

    @property
    def passed(self) -> bool:
        return bool(self.rows) and self.rows[0]["status"] == "SUCCEEDED" and not self.differ and not self.duplicates

    def summary(self) -> str:
        """One line: runs, fired, differing, duplicates, and the verdict."""
        fired = sum(bool(r["fired"]) for r in self.rows[1:])
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"campaign {self.scenario}: {verdict}: {len(self.rows)} runs (1 clean), {fired} with faults that fired, "
            f"{len(self.differ)} differ from the clean run, {self.duplicates} duplicate effects"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "passed": self.passed,
            "runs": len(self.rows),
            "differ": [r["case"] for r in self.differ],
            "duplicates": self.duplicates,
            "unfired": self.unfired,
            "rows": self.rows,
        }


def run_campaign(
    stack: Any,
    scenario: Any,
    plan: CampaignPlan,
    *,
    run_id: str | None = None,
    case_timeout: float = 180.0,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> CampaignResult:
    """Run ``scenario`` clean, then each case of ``plan``, each on a wiped world with the same run id
    (so its transcript can equal the clean one's), and compare each with the clean run.

    A case that cannot finish is a row with its error, not the campaign's end.
    """
    from longstep_kit.local.runner import run_scenario

    run_id = run_id or scenario.input.run_id or scenario.name
    names = itertools.count()
    result = CampaignResult(scenario.name)
    clean: dict[str, Any] | None = None
    for case in [Case("clean"), *plan.cases(scenario)]:
        stack.reset_data()
        waited = len(stack.clock.retry_delays)
        options = RunOptions(
            run_id=run_id,
            execution_name=f"campaign-{next(names)}",
            faults=list(case.faults),
            restart_at=case.restart_at,
            timeout_seconds=case_timeout,
        )
        try:
            report = run_scenario(stack, scenario, options)
        except Exception as exc:  # noqa: BLE001 - one case's failure is its row
            row = {
                "case": case.label,
                "fired": True,
                "same_run": False,
                "duplicates": None,
                "status": "ERROR",
                "error": f"{type(exc).__name__}: {exc}"[:300],
            }
        else:
            report = {**report, **timer_view(stack, run_id), "retried_seconds": sum(stack.clock.retry_delays[waited:])}
            clean = clean or report
            row = _row(case, report, clean)
        result.rows.append(row)
        if on_row is not None:
            on_row(row)
    return result


def _row(case: Case, report: dict[str, Any], clean: dict[str, Any]) -> dict[str, Any]:
    effects = report["effects"]
    return {
        "case": case.label,
        "fired": bool(report.get("faults_injected") or report.get("restarts")) or case.label == "clean",
        "same_run": same_agent_run(report, clean),
        "duplicates": effects["duplicate_effects"],
        "duplicated": effects["duplicates"],
        "status": report["status"],
        "cause": report.get("cause"),
        "effects": effects["by_tool"],
    }


def timer_view(stack: Any, run_id: str) -> dict[str, Any]:
    """The run's timer ends (each ``wait_for`` timer's ``until``, in order) and the hash of its
    transcript with those ends masked."""
    from longstep import keys
    from longstep.messages import transcript_sha256
    from longstep.store import CheckpointStore
    from longstep.transcript import transcript

    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    run = store.get(run_id, keys.RUN_RECORD)
    messages = transcript({"goal": run["goal"]}, store.steps(run_id)) if run else []
    ends: list[str] = []

    def mask(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("waited") == "timer" and "until" in value:
                ends.append(str(value["until"]))
                return {**value, "until": "<timer end>"}
            return {k: mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    return {"timer_free_sha256": transcript_sha256(mask(messages)), "timer_ends": ends}


def timer_shifts(report: dict[str, Any], clean: dict[str, Any]) -> list[float]:
    """How many seconds each of the run's timer ends is after the clean run's."""

    def at(end: str) -> float:
        return dt.datetime.fromisoformat(end.replace("Z", "+00:00")).timestamp()

    return [at(end) - at(was) for end, was in zip(report.get("timer_ends", []), clean.get("timer_ends", []))]


def same_agent_run(report: dict[str, Any], clean: dict[str, Any]) -> bool:
    """Whether an agent scenario's faulted run gave its clean run: the same status, the same effects
    from the agents' own ledgers, and the same transcript, but for its timers' ends, which may be
    later by no more than the retry backoff the engine waited in the run.

    Why the ends may move: a ``wait_for`` timer ends ``seconds`` after its turn's ModelTurn state
    was entered (``$$.State.EnteredTime``), and a retry delays the state after the one retried. The
    state machine's retriers use full jitter, a delay "between 0 and the computed backoff"
    (https://docs.aws.amazon.com/cdk/api/v2/python/aws_cdk.aws_stepfunctions/JitterType.html), and
    a Wait's timestamp counts whole seconds (https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html):
    so on AWS as locally, crashes retried before a timer's turn can end that timer a second or more
    later, and the model reads that end. Nothing ran twice; every other byte must be the same.
    """
    if report["status"] != clean["status"] or report["effects"] != clean["effects"]:
        return False
    if report["transcript_sha256"] == clean["transcript_sha256"]:
        return True
    if report.get("timer_free_sha256") is None or report.get("timer_free_sha256") != clean.get("timer_free_sha256"):
        return False
    shifts = timer_shifts(report, clean)
    retried = float(report.get("retried_seconds") or 0)
    return len(report["timer_ends"]) == len(clean["timer_ends"]) and all(0 <= s <= retried for s in shifts)
