"""The call item's typed answers read what the state machine writes into the item: every Pass state
of the synthesized definition that answers a call names only fields of its sub-record, and the
answers the tasks and the humans send parse into the fields the tools read."""

from __future__ import annotations

import json
from pathlib import Path

from longstep.contract.call import CallItem, Check, ChildOutcome, Decision, Signal

GOLDEN = Path(__file__).resolve().parents[1] / "infra" / "golden" / "state_machine.asl.json"
ITEM = {"run_id": "r", "turn": 0, "call": 0, "tool": "t"}


def _answers(states: dict) -> dict[str, dict]:
    """The Pass states writing an answer into the item: result path -> their result's fields."""
    out = {}
    for state in states.values():
        if state["Type"] == "Pass" and (state.get("Result") or state.get("Parameters")):
            path = state.get("ResultPath", "")
            if path.count(".") == 1 and path.removeprefix("$.") in CallItem.model_fields:
                fields = {name.removesuffix(".$") for name in (state.get("Result") or state.get("Parameters"))}
                out[path.removeprefix("$.")] = fields
        inner = state.get("ItemProcessor") or state.get("Iterator")
        if inner:
            out.update(_answers(inner["States"]))
    return out


def test_each_answer_the_definition_writes_is_a_field_of_its_sub_record():
    answers = _answers(json.loads(GOLDEN.read_text())["States"])
    assert set(answers) == {"decision", "check", "signal", "child"}
    for name, fields in answers.items():
        record = CallItem.model_fields[name].annotation.__args__[0]  # X | None
        known = {field.alias or key for key, field in record.model_fields.items()} | set(record.model_fields)
        assert fields <= known, (name, fields - known)


def test_the_answers_parse_as_the_tools_read_them():
    item = CallItem.model_validate(
        {
            **ITEM,
            "decision": {"decision": "edit", "approver": "ana", "input": {"n": 2}},
            "signal": {"payload": {"ok": True}, "entry": "signal#ci#00000001", "to": "tok"},
            "check": {"done": True, "met": True, "handover": False, "waited": 30, "result": {"x": 1}},
            "child": {"run_id": "c", "status": "SUCCEEDED", "turns": 2, "stop": "end_turn", "output": "done"},
            "resolution": {"action": "retry", "happened": False, "resolver": "bo"},
        }
    )
    assert item.decision == Decision(decision="edit", approver="ana", input={"n": 2})
    assert item.signal == Signal(payload={"ok": True}, entry="signal#ci#00000001", to="tok")
    assert item.check == Check(done=True, met=True, waited=30, result={"x": 1})
    assert item.child is not None and item.child.result() == {"run_id": "c", "status": "SUCCEEDED", "turns": 2, "output": "done"}
    assert item.resolution is not None and item.resolution.retry_without_effect


def test_a_caught_error_is_an_answer_too():
    failed = CallItem.model_validate({**ITEM, "child": {"Error": "SubagentFailed", "Cause": "run c failed"}})
    assert failed.child == ChildOutcome(Error="SubagentFailed", Cause="run c failed")
    assert "error" in failed.child.model_fields_set
    taken = CallItem.model_validate({**ITEM, "signal": {"Error": "SignalTakenError", "Cause": "waiting again"}})
    assert taken.signal is not None and taken.signal.error == "SignalTakenError" and taken.signal.entry is None
