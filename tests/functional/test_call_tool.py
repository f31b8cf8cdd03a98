"""CallTool: each effect class stays safe when a crash makes the call run again."""

from __future__ import annotations

import json

import pytest

from longstep import keys
from longstep.store import decode_json, plain_item as _plain
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep.errors import InvalidInputError, OutcomeUnknownError

from tests.functional.conftest import drive_to, handler, load_event, scan
from agents import triage_world


def _forget_result(aws, turn: int, call: int) -> None:
    """Simulate a crash after the effect and before the result was recorded.

    A crashed invocation records nothing, and its lock on the idempotency table expires when the
    invocation would have timed out: remove both.
    """
    aws["ddb"].delete_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.tool_step_key(turn, call)}})
    for lock in scan(aws["ddb"], "idempotency"):
        aws["ddb"].delete_item(TableName="idempotency", Key={"id": lock["id"]})


def _result(aws, turn: int, call: int) -> dict:
    item = aws["ddb"].get_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.tool_step_key(turn, call)}})["Item"]
    return decode_json("result", _plain(item))


def _call(turn: int, call: int, tool: str, decision=None) -> dict:
    item = {"run_id": "func-run-1", "turn": turn, "call": call, "tool": tool, "approval": decision is not None}
    if decision:
        item["decision"] = decision
    return handler("call_tool")(item)


def test_read_tool_result_is_recorded_and_replayed(aws):
    drive_to(0)
    handler("model_turn")(load_event("model_turn"))
    first = handler("call_tool")(load_event("call_tool"))
    again = handler("call_tool")(load_event("call_tool"))
    assert (first["replayed"], again["replayed"]) == (False, True)
    assert _result(aws, 0, 0)["content"]["results"][0]["doc_id"] == "incident-2041"


def test_the_eval_variant_answers_only_an_eval_runs_calls(aws):
    # BindEval binds CallToolEval for eval runs only; another run's call is refused before it runs.
    drive_to(0)
    handler("model_turn")(load_event("model_turn"))
    with pytest.raises(InvalidInputError, match="not an eval run"):
        handler("call_tool_eval")(load_event("call_tool"))
    assert not [i for i in scan(aws["ddb"], "checkpoints") if i["sk"]["S"] == keys.tool_step_key(0, 0)]


def test_large_output_is_offloaded_to_s3_once(aws):
    drive_to(1)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 1})
    _call(1, 0, "read_document")
    stored = _result(aws, 1, 0)["content"]
    assert stored["offloaded"]["bytes"] > 300_000
    assert len(json.dumps(stored)) < 4_000
    obj = aws["s3"].get_object(Bucket="longstep-test-artifacts", Key=ARTIFACT_PREFIX + stored["offloaded"]["sha256"])
    assert obj["ContentEncoding"] == "deflate" and obj["ContentLength"] < 100_000  # stored compressed
    body = ArtifactStore("longstep-test-artifacts", aws["s3"]).get(stored["offloaded"]["uri"])
    assert json.loads(body)["doc_id"] == "incident-2041"
    _forget_result(aws, 1, 0)
    _call(1, 0, "read_document")  # the same content again: the same key, one object
    objects = [o["Key"] for o in aws["s3"].list_objects_v2(Bucket="longstep-test-artifacts", Prefix="artifacts/")["Contents"]]
    assert objects == [ARTIFACT_PREFIX + stored["offloaded"]["sha256"]]
    assert stored["offloaded"]["uri"] == "artifact://sha256/" + stored["offloaded"]["sha256"]


def test_keyed_tool_is_deduplicated_by_the_remote_system(aws):
    drive_to(2)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 2})
    _call(2, 0, "file_ticket")
    first = _result(aws, 2, 0)["content"]
    _forget_result(aws, 2, 0)
    _call(2, 0, "file_ticket")
    second = _result(aws, 2, 0)["content"]
    assert first == second  # the repeat is answered as the first call was
    assert first["ticket_id"].startswith("TCK-")
    assert len([t for t in scan(aws["ddb"], "tickets") if t.get("run_id")]) == 1


def test_check_then_act_skips_an_update_already_applied(aws):
    drive_to(3)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 3})
    _call(3, 0, "update_ticket")
    first = _result(aws, 3, 0)
    _forget_result(aws, 3, 0)
    _call(3, 0, "update_ticket")
    assert _result(aws, 3, 0) == first
    ticket = aws["ddb"].get_item(TableName="tickets", Key={"ticket_id": {"S": "BUG-101"}})["Item"]
    assert [e["S"] for e in ticket["update_log"]["L"]] == ["func-run-1:3:0"]
    assert ticket["status"]["S"] == "triaged"


def test_at_most_once_tool_interrupted_after_acting_is_resolved_by_its_probe(aws):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    _call(5, 0, "send_email", {"decision": "approve"})
    first = _result(aws, 5, 0)
    _forget_result(aws, 5, 0)
    out = _call(5, 0, "send_email", {"decision": "approve"})  # the probe finds the row in the outbox
    assert out["status"] == "success" and _result(aws, 5, 0) == first
    assert len(scan(aws["ddb"], "outbox")) == 1


def test_at_most_once_tool_interrupted_before_acting_runs_once_when_its_probe_says_no(aws):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    _call(5, 0, "send_email", {"decision": "approve"})
    _forget_result(aws, 5, 0)
    (row,) = scan(aws["ddb"], "outbox")
    aws["ddb"].delete_item(TableName="outbox", Key={"message_id": row["message_id"]})  # as if it crashed before sending
    assert _call(5, 0, "send_email", {"decision": "approve"})["status"] == "success"
    assert len(scan(aws["ddb"], "outbox")) == 1


def test_at_most_once_tool_escalates_when_its_probe_cannot_answer(aws, monkeypatch):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    _call(5, 0, "send_email", {"decision": "approve"})
    _forget_result(aws, 5, 0)
    monkeypatch.setenv(triage_world.OUTBOX.variable, "no-such-table")  # the outbox cannot be read
    with pytest.raises(OutcomeUnknownError, match="may have acted; its probe failed: ResourceNotFoundException"):
        _call(5, 0, "send_email", {"decision": "approve"})
    assert len(scan(aws["ddb"], "outbox")) == 1


def test_rejected_call_does_not_run_and_tells_the_model(aws):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    out = _call(5, 0, "send_email", {"decision": "reject", "reason": "not now"})
    assert out["status"] == "error"
    assert "not now" in _result(aws, 5, 0)["content"]["error"]
    assert scan(aws["ddb"], "outbox") == []


def test_edited_call_runs_with_the_edited_arguments(aws):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    edited = {"to": "someone@example.com", "subject": "edited", "body": "edited body"}
    _call(5, 0, "send_email", {"decision": "edit", "input": edited})
    (row,) = scan(aws["ddb"], "outbox")
    assert (row["to"]["S"], row["subject"]["S"]) == ("someone@example.com", "edited")


def test_bad_arguments_become_a_corrective_result(aws):
    drive_to(2)
    aws["ddb"].put_item(
        TableName="checkpoints",
        Item={
            "pk": {"S": "func-run-1"},
            "sk": {"S": keys.model_step_key(2)},
            "kind": {"S": "model"},
            "name": {"S": "converse"},
            "result": {
                "S": json.dumps(
                    {
                        "message": {
                            "role": "assistant",
                            "content": [{"toolUse": {"toolUseId": "x", "name": "file_ticket", "input": {"priority": "urgent"}}}],
                        },
                        "stop_reason": "tool_use",
                    }
                )
            },
        },
    )
    out = _call(2, 0, "file_ticket")
    assert out["status"] == "error"
    error = _result(aws, 2, 0)["content"]["error"]
    assert "title" in error and "priority" in error
    assert [t for t in scan(aws["ddb"], "tickets") if t.get("run_id")] == []


def _script_call(aws, turn: int, name: str, args: dict) -> None:
    """Record a model reply for ``turn`` that makes one tool call (as a model would)."""
    from longstep.store import CheckpointStore

    reply = {
        "message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": f"t{turn}", "name": name, "input": args}}]},
        "stop_reason": "tool_use",
    }
    CheckpointStore("checkpoints", aws["ddb"]).record_step("func-run-1", keys.model_step_key(turn), "model", "converse", reply)


def test_read_artifact_pages_through_an_offloaded_output(aws):
    drive_to(2)  # turn 1 read the 330 KB incident report: it was offloaded
    ref = _result(aws, 1, 0)["content"]["offloaded"]["uri"]
    _script_call(aws, 2, "read_artifact", {"ref": ref, "offset": 100, "length": 50})
    out = _call(2, 0, "read_artifact")
    assert out["status"] == "success"
    page = _result(aws, 2, 0)["content"]
    assert page["length"] == 50 and page["total_chars"] > 300_000
    full = ArtifactStore("longstep-test-artifacts", aws["s3"]).get(ref).decode()
    assert page["text"] == full[100:150]


def test_read_artifact_with_an_unknown_ref_tells_the_model(aws):
    drive_to(2)
    _script_call(aws, 2, "read_artifact", {"ref": "artifact://sha256/" + "0" * 64})
    assert _call(2, 0, "read_artifact")["status"] == "error"
    assert "no artifact" in _result(aws, 2, 0)["content"]["error"]
