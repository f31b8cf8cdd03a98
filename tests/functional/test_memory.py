"""Long-term memory: remembered in one run, in the system prompt of the next, per agent and user."""

from __future__ import annotations

from longstep import keys
from longstep.models.scripted import ScriptedProvider
from longstep.store import CheckpointStore

from tests.functional.conftest import handler, load_event, scan


def _start(run_id: str, user: str | None = None) -> None:
    event = {**load_event("init_run"), "run_id": run_id}
    if user:
        event["user"] = user
    handler("init_run")(event)


def _tool_turn(aws, run_id: str, turn: int, name: str, args: dict) -> dict:
    reply = {
        "message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": f"m{turn}", "name": name, "input": args}}]},
        "stop_reason": "tool_use",
    }
    CheckpointStore("checkpoints", aws["ddb"]).record_step(run_id, keys.model_step_key(turn), "model", "converse", reply)
    handler("call_tool")({"run_id": run_id, "turn": turn, "call": 0, "tool": name})
    return CheckpointStore("checkpoints", aws["ddb"]).get_step(run_id, keys.tool_step_key(turn, 0)).result


def test_a_fact_remembered_in_one_run_is_in_the_next_runs_system_prompt(aws, monkeypatch):
    _start("mem-1")
    assert _tool_turn(aws, "mem-1", 0, "remember", {"key": "payments owner", "value": "payments-oncall@example.com"})["status"] == "success"
    assert [i["key"]["S"] for i in scan(aws["ddb"], "memory")] == ["payments owner"]
    seen = []
    original = ScriptedProvider.converse

    def spy(self, **kwargs):
        seen.append(kwargs["system"])
        return original(self, **kwargs)

    monkeypatch.setattr(ScriptedProvider, "converse", spy)
    _start("mem-2")
    handler("model_turn")({"run_id": "mem-2", "next_turn": 0})
    assert "payments owner: payments-oncall@example.com" in seen[-1]
    recalled = _tool_turn(aws, "mem-2", 1, "recall", {"query": "payments"})
    assert recalled["content"] == {"memories": [{"key": "payments owner", "value": "payments-oncall@example.com"}]}


def test_memories_are_kept_per_user(aws):
    _start("mem-alice", user="alice")
    _tool_turn(aws, "mem-alice", 0, "remember", {"key": "style", "value": "short answers"})
    _start("mem-bob", user="bob")
    assert _tool_turn(aws, "mem-bob", 0, "recall", {"query": ""})["content"] == {"memories": []}
    _start("mem-alice-2", user="alice")
    assert _tool_turn(aws, "mem-alice-2", 0, "recall", {})["content"]["memories"][0]["value"] == "short answers"


def test_bad_remember_arguments_are_corrected_not_written(aws):
    _start("mem-bad")
    out = _tool_turn(aws, "mem-bad", 0, "remember", {"key": ""})
    assert out["status"] == "error" and "value" in out["content"]["error"]
    assert scan(aws["ddb"], "memory") == []
