"""A fault campaign from Python: triage.json clean, then a crash right after the effect of each turn."""

from longstep_kit.testing import CampaignPlan, LocalStack, load_scenario, run_campaign


def crash_after_each_effect(turns: tuple[int, ...] | None = None) -> tuple[bool, int, list[str]]:
    """Whether every crashed run gave the clean run, the duplicate effects counted, the cases run."""
    plan = CampaignPlan(points=("after_effect",), turns=turns, seeds=(), restarts=False)
    with LocalStack() as stack:
        result = run_campaign(stack, load_scenario("events/scenarios/triage.json"), plan)
    print(result.summary())
    return result.passed, result.duplicates, [row["case"] for row in result.rows]
