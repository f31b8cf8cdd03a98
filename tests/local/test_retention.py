"""No record a live run needs expires while the run lives: a wait longer than the retention
(DynamoDB TTL, deleted by the local stack the moment it passes) keeps the run's records."""

from __future__ import annotations

from longstep import keys
from longstep.store import CheckpointStore
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario

RUN = "long-wait"


def _retention_days() -> int:
    """The deployed retention (cdk.json's ``longstep``, what the local stack synthesizes)."""
    import json
    from pathlib import Path

    from longstep_kit.config import load_config

    cdk_json = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())
    return load_config(cdk_json["context"]["longstep"]).retention_days


DAY = 86_400


def _scenario(triage, wait_days: int) -> Scenario:
    wait = {"name": "wait_for", "input": {"event": "quarterly_review", "timeout_seconds": wait_days * DAY}}
    return Scenario.model_validate(
        {
            "name": "long_wait",
            "input": {"goal": "Wait for the quarterly review.", "agent": "triage", "max_turns": 3},
            "world": triage.world,
            "turns": {
                "0": {"text": "Waiting for the review.", "tool_calls": [wait]},
                "1": {"text": "Summary: the review never came."},
            },
        }
    )


def test_a_wait_longer_than_the_retention_keeps_the_runs_records(stack, triage):
    retention_days = _retention_days()
    stack.reset_data()
    report = run_scenario(stack, _scenario(triage, retention_days + 30), RunOptions(run_id=RUN, execution_name="long-wait-1"))
    assert report["status"] == "SUCCEEDED"
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    first_reply = store.get_step(RUN, keys.model_step_key(0))
    assert first_reply is not None  # written before the wait, still there after it
    assert store.get_step(RUN, keys.tool_step_key(0, 0)).result["content"]["timed_out"] is True
    # Kept for the retention after the run ended, not after it was written.
    finished = store.get(RUN, keys.FINAL_RECORD)["finished_at"]
    ttl = keys.checkpoint_table().ttl_attribute
    assert float(store.get(RUN, keys.model_step_key(0))[ttl]) >= finished + retention_days * DAY
