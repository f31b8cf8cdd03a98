"""longstep.transcript: completed_turns and transcript on hand-built step records."""

import random

import pytest

from longstep import keys
from longstep.errors import StepRecordLostError
from longstep.transcript import completed_turns, transcript
from longstep.messages import tool_uses, transcript_sha256
from longstep.store import StepRecord

RUN = {"goal": "triage the backlog", "agent": "triage"}


def model(turn, *tools, text=None):
    content = [{"text": text}] if text else []
    content += [{"toolUse": {"toolUseId": f"id-{turn}-{i}", "name": name, "input": {"i": i}}} for i, name in enumerate(tools)]
    reply = {"message": {"role": "assistant", "content": content}, "stop_reason": "tool_use" if tools else "end_turn", "usage": {}}
    return StepRecord(keys.model_step_key(turn), "model", "converse", reply)


def result(turn, call, content, status="success", name="search_docs"):
    return StepRecord(keys.tool_step_key(turn, call), "tool", name, {"status": status, "content": content})


def in_key_order(steps):
    return sorted(steps, key=lambda s: s.sk)


FULL_RUN = in_key_order(
    [
        model(0, "search_docs", "read_document", text="looking"),
        result(0, 0, {"hits": 2}),
        result(0, 1, {"error": "no doc"}, status="error", name="read_document"),
        model(1, "file_ticket"),
        result(1, 0, "TCK-1", name="file_ticket"),
        model(2, text="done"),
    ]
)


# -- completed_turns -------------------------------------------------------------------------


def test_no_steps_means_no_completed_turns():
    assert completed_turns([]) == 0


def test_turn_with_all_results_is_complete():
    assert completed_turns([model(0, "a", "b"), result(0, 0, 1), result(0, 1, 2)]) == 1


def test_turn_missing_a_result_is_not_complete():
    assert completed_turns([model(0, "a", "b"), result(0, 0, 1)]) == 0
    assert completed_turns([model(0, "a", "b"), result(0, 1, 1)]) == 0


def test_model_reply_without_results_is_not_complete():
    assert completed_turns([model(0, "a")]) == 0


def test_final_text_turn_is_where_a_resumed_run_continues():
    # The end_turn reply of turn 2 is replayed (not re-asked) by resuming at turn 2.
    assert completed_turns(FULL_RUN) == 2


def test_counts_only_leading_turns():
    steps = [model(0, "a"), result(0, 0, 1), model(1, "a", "b"), result(1, 1, 1), model(2, "a"), result(2, 0, 1)]
    assert completed_turns(in_key_order(steps)) == 1


def test_tool_results_without_a_model_reply_do_not_complete_a_turn():
    assert completed_turns([result(0, 0, 1)]) == 0


def test_completed_turns_ignores_step_list_order():
    shuffled = list(FULL_RUN)
    random.Random(7).shuffle(shuffled)
    assert completed_turns(shuffled) == completed_turns(FULL_RUN)


# -- transcript --------------------------------------------------------------------------------


def test_empty_log_gives_just_the_goal():
    assert transcript(RUN, []) == [{"role": "user", "content": [{"text": RUN["goal"]}]}]


def test_full_run_alternates_roles_and_starts_with_the_goal():
    messages = transcript(RUN, FULL_RUN)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == [{"text": RUN["goal"]}]
    assert messages[-1] == FULL_RUN[-1].result["message"]


def test_tool_results_follow_call_order_and_match_tool_use_ids():
    messages = transcript(RUN, FULL_RUN)
    uses = tool_uses(messages[1])
    blocks = [b["toolResult"] for b in messages[2]["content"]]
    assert [b["toolUseId"] for b in blocks] == [u["toolUseId"] for u in uses]


def test_tool_results_are_in_call_order_even_when_recorded_out_of_order():
    steps = [model(0, "a", "b", "c"), result(0, 2, {"c": 1}), result(0, 0, {"a": 1}), result(0, 1, {"b": 1})]
    blocks = [b["toolResult"] for b in transcript(RUN, steps)[2]["content"]]
    assert [b["toolUseId"] for b in blocks] == ["id-0-0", "id-0-1", "id-0-2"]
    assert [b["content"][0]["json"] for b in blocks] == [{"a": 1}, {"b": 1}, {"c": 1}]


def test_error_results_carry_error_status():
    blocks = [b["toolResult"] for b in transcript(RUN, FULL_RUN)[2]["content"]]
    assert [b["status"] for b in blocks] == ["success", "error"]
    assert blocks[1]["content"] == [{"json": {"error": "no doc"}}]


def test_non_object_content_is_wrapped_as_json_object():
    (block,) = transcript(RUN, FULL_RUN)[4]["content"]
    payload = block["toolResult"]["content"][0]["json"]
    assert isinstance(payload, dict)
    assert "TCK-1" in payload.values()


def test_upto_turn_gives_the_history_a_model_call_sees():
    assert transcript(RUN, FULL_RUN, upto_turn=0) == transcript(RUN, [])
    upto1 = transcript(RUN, FULL_RUN, upto_turn=1)
    assert len(upto1) == 3
    assert upto1[-1]["role"] == "user"
    assert transcript(RUN, FULL_RUN, upto_turn=2) == transcript(RUN, FULL_RUN)[:5]


def test_upto_turn_does_not_look_at_later_partial_turns():
    steps = [*FULL_RUN[:3], model(1, "a", "b")]  # turn 1 has no results yet
    assert len(transcript(RUN, steps, upto_turn=1)) == 3


def test_missing_result_before_upto_turn_is_reported_missing_not_non_determinism():
    # Issue 24: an expired (or deleted) result is missing, not different: a typed error that says so.
    steps = [model(0, "a", "b"), result(0, 0, 1), model(1, text="done")]
    with pytest.raises(StepRecordLostError, match="call 1: its recorded result is missing"):
        transcript(RUN, steps, upto_turn=1)


def test_partial_turn_without_upto_shows_results_so_far():
    steps = [model(0, "a", "b", "c"), result(0, 0, {"first": True})]
    messages = transcript(RUN, steps)
    assert len(messages) == 3
    assert [b["toolResult"]["toolUseId"] for b in messages[2]["content"]] == ["id-0-0"]


def test_partial_turn_stops_at_the_first_missing_result():
    steps = [model(0, "a", "b", "c"), result(0, 0, 1), result(0, 2, 3)]
    (msg_blocks,) = [m["content"] for m in transcript(RUN, steps)[2:]]
    assert [b["toolResult"]["toolUseId"] for b in msg_blocks] == ["id-0-0"]


def test_partial_turn_with_no_results_ends_on_the_assistant_message():
    messages = transcript(RUN, [model(0, "a")])
    assert [m["role"] for m in messages] == ["user", "assistant"]


def test_tool_results_without_model_reply_are_reported_missing():
    with pytest.raises(StepRecordLostError, match="turn 0 has tool results but its model reply is missing"):
        transcript(RUN, [result(0, 0, 1)])


def test_transcript_hash_is_independent_of_step_list_order():
    shuffled = list(FULL_RUN)
    random.Random(3).shuffle(shuffled)
    assert transcript_sha256(transcript(RUN, shuffled)) == transcript_sha256(transcript(RUN, FULL_RUN))


def test_transcript_hash_changes_when_a_recorded_result_changes():
    changed = [*FULL_RUN[:1], result(0, 0, {"hits": 3}), *FULL_RUN[2:]]
    assert transcript_sha256(transcript(RUN, changed)) != transcript_sha256(transcript(RUN, FULL_RUN))


def test_completed_turns_history_is_always_buildable():
    logs = [
        [],
        [model(0, "a")],
        [model(0, "a", "b"), result(0, 0, 1)],
        FULL_RUN,
        [*FULL_RUN[:4]],
    ]
    for steps in logs:
        turn = completed_turns(steps)
        messages = transcript(RUN, steps, upto_turn=turn)
        assert messages[-1]["role"] == "user"  # Converse needs the history to end on the user side
