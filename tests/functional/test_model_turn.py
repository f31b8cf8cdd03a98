"""ModelTurn: the reply is recorded before the handler returns, and replayed ever after."""

from __future__ import annotations


import json

import pytest

from longstep import keys
from longstep.store import decode_json, plain_item as _plain
from longstep.errors import InvalidInputError, NonDeterminismError
from longstep.models.scripted import ScriptedProvider

from tests.functional.conftest import drive_to, handler, load_event, scan, script_provider


def test_records_the_reply_and_routes_its_one_call_to_call_one_tool(aws):
    handler("init_run")(load_event("init_run"))
    out = handler("model_turn")(load_event("model_turn"))
    # One call that waits for nothing: CallOneTool runs it, the output naming it as a call item.
    assert (out["route"], out["call"], out["tool"], out["wait"], out["approval"]) == ("tool", 0, "search_docs", "none", False)
    assert out["calls"] == [{"run_id": "func-run-1", "turn": 0, "call": 0, "tool": "search_docs", "approval": False, "wait": "none"}]
    assert out["replayed"] is False
    record = aws["ddb"].get_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.model_step_key(0)}})["Item"]
    assert record["kind"]["S"] == "model"
    assert decode_json("result", _plain(record))["message"]["content"][1]["toolUse"]["name"] == "search_docs"


def test_a_re_invoked_turn_replays_without_calling_the_model(aws):
    handler("init_run")(load_event("init_run"))
    first = handler("model_turn")(load_event("model_turn"))
    calls_before = script_provider().calls
    again = handler("model_turn")(load_event("model_turn"))
    assert script_provider().calls == calls_before == 1
    assert again["replayed"] is True
    assert again["calls"] == first["calls"]


def test_approval_flag_comes_from_the_tool_declaration(aws):
    drive_to(5)
    out = handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    assert [(c["tool"], c["approval"]) for c in out["calls"]] == [("send_email", True)]


def test_the_model_sees_the_goal_its_reply_and_the_tool_result(aws, monkeypatch):
    seen = []
    original = ScriptedProvider.converse

    def spy(self, **kwargs):
        seen.append(kwargs)
        return original(self, **kwargs)

    monkeypatch.setattr(ScriptedProvider, "converse", spy)
    drive_to(1)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 1})
    messages = seen[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][0]["text"] == load_event("init_run")["goal"]
    result = messages[2]["content"][0]["toolResult"]
    assert result["toolUseId"] == "t0c0" and result["status"] == "success"
    assert result["content"][0]["json"]["results"][0]["doc_id"] == "incident-2041"
    assert {spec["toolSpec"]["name"] for spec in seen[-1]["tools"]} == {
        "search_docs",
        "read_document",
        "file_ticket",
        "update_ticket",
        "send_email",
        "wait_for",
        "read_artifact",
        "remember",
        "recall",
    }


def test_a_record_of_another_kind_is_a_non_determinism_error(aws):
    handler("init_run")(load_event("init_run"))
    aws["ddb"].put_item(
        TableName="checkpoints",
        Item={
            "pk": {"S": "func-run-1"},
            "sk": {"S": keys.model_step_key(0)},
            "kind": {"S": "tool"},
            "name": {"S": "search_docs"},
            "result": {"S": "{}"},
        },
    )
    with pytest.raises(NonDeterminismError, match="recorded as tool:search_docs"):
        handler("model_turn")(load_event("model_turn"))


def test_max_turns_routes_to_done_without_a_model_call(aws):
    handler("init_run")(load_event("init_run"))
    out = handler("model_turn")({"run_id": "func-run-1", "next_turn": 20})
    assert out["route"] == "done" and out["stop"] == "max_turns"
    assert scan(aws["ddb"], "checkpoints") and all(not i["sk"]["S"].startswith("step#") for i in scan(aws["ddb"], "checkpoints"))


def test_unknown_run_is_an_input_error(aws):
    with pytest.raises(InvalidInputError, match="run_id: no run named 'ghost'"):
        handler("model_turn")({"run_id": "ghost", "next_turn": 0})


def test_a_removed_record_is_a_step_not_made_yet(aws):
    """The step's record is its own lock (longstep.claims): once it is removed by hand nothing says
    the step ran, so the model is asked again (as after a crash before the reply was recorded) and
    the new reply recorded; no completed lock outlives a step to say otherwise."""
    handler("init_run")(load_event("init_run"))
    handler("model_turn")(load_event("model_turn"))
    aws["ddb"].delete_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.model_step_key(0)}})
    out = handler("model_turn")(load_event("model_turn"))
    assert out["replayed"] is False and script_provider().calls == 2
    assert {"result", "result_z"} & set(
        aws["ddb"].get_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.model_step_key(0)}})["Item"]
    )


def test_no_lock_item_is_kept_once_a_step_is_recorded(aws):
    handler("init_run")(load_event("init_run"))
    handler("model_turn")(load_event("model_turn"))
    assert scan(aws["ddb"], "idempotency") == []
    (record,) = [i for i in scan(aws["ddb"], "checkpoints") if i["sk"]["S"] == keys.model_step_key(0)]
    assert "attempt" not in record and "lease_until" not in record and "toolUse" in json.dumps(decode_json("result", _plain(record)))


def test_call_one_tool_hands_the_next_model_turn_its_cursor(aws):
    handler("init_run")(load_event("init_run"))
    out = handler("model_turn")(load_event("model_turn"))
    result = handler("call_tool")(out)  # CallOneTool's input is ModelTurn's output
    assert (result["turn"], result["call"], result["status"], result["replayed"]) == (0, 0, "success", False)
    # What CallOneTool's ResultSelector hands the next ModelTurn (tests/infra checks the selector):
    assert (result["next_turn"], result["generation"], result["generation_start"]) == (out["next_turn"], 0, 0) == (1, 0, 0)
    assert result["resolution"] is None  # the next ModelTurn's: a human's answer to this call is not its
    assert handler("call_tool")(out)["replayed"] is True
    cursor = {k: result[k] for k in ("run_id", "next_turn", "resolution", "generation", "generation_start")}
    assert handler("model_turn")(cursor)["turn"] == 1


def test_a_turn_with_a_call_that_waits_keeps_the_map(aws):
    drive_to(5)
    out = handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})  # send_email: an approval
    assert out["route"] == "tools" and "call" not in out
