"""Finish: the final answer is recorded and returned."""

from __future__ import annotations

import json

from longstep import keys

from tests.functional.conftest import drive_to, handler, load_event


def test_returns_and_records_the_last_reply_text(aws):
    drive_to(8)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 8})
    out = handler("finish")(load_event("finish"))
    assert out["status"] == "SUCCEEDED" and out["turns"] == 9
    assert out["output"].startswith("Summary:")
    final = aws["ddb"].get_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.FINAL_RECORD}})["Item"]
    assert json.loads(final["output"]["S"]) == out
