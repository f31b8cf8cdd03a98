"""Steering live runs on the local stack: a message taken at the next model turn and replayed exactly,
a pause that holds no compute for three (virtual) days, a stop at the next step boundary that
cancels the calls not yet run and can be resumed, and starting a running run id under each
double-texting policy."""

from __future__ import annotations

import pytest

from longstep import events as ev
from longstep import keys, steering
from longstep.events import EventLog
from longstep.humans.table import ApprovalTable
from longstep.store import CheckpointStore
from longstep.transcript import transcript
from longstep_kit.ops import live, runs
from longstep_kit.ops.steer import RunIsRunningError, RunNotRunningError, Steering
from longstep_kit.testing import RunOptions, run_scenario, wait_execution, wait_until
from tests.local.conftest import Background
from tests.conftest import campaign

THREE_DAYS = 3 * 86_400


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _steer(stack) -> Steering:
    approvals = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    return Steering(_store(stack), stack.client("stepfunctions"), stack.state_machine_arn, approvals, who="test")


def _after_model_turn(stack, run_id: str, turn: int, action):
    """Do ``action`` once, right after ``turn``'s ModelTurn of ``run_id`` returns (before its calls run)."""
    done = []

    def hook(inv) -> None:
        if not done and inv.task == "model_turn" and inv.error is None and inv.event.get("run_id") == run_id and inv.result.get("turn") == turn:
            done.append(True)
            action()

    stack.dispatcher.after_invoke.append(hook)
    return hook


def test_a_message_is_taken_at_the_next_model_turn_and_replayed_exactly(stack, triage):
    run_id = "steer-message"
    hook = _after_model_turn(stack, run_id, 2, lambda: _steer(stack).send(run_id, "Also check BUG-103 while you are at it."))
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=run_id))
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    assert report["status"] == "SUCCEEDED"
    store = _store(stack)
    recorded = store.get_step(run_id, keys.model_step_key(3)).result
    assert recorded["steering"] == ["Also check BUG-103 while you are at it."]
    history = transcript(store.get(run_id, keys.RUN_RECORD), store.steps(run_id))
    # The message joins the user message (turn 2's tool results) before turn 3's reply.
    before_reply = history[[i for i, m in enumerate(history) if m["role"] == "assistant"][3] - 1]
    assert before_reply["role"] == "user" and before_reply["content"][-1] == {
        "text": steering.MESSAGE_PREFIX + "Also check BUG-103 while you are at it."
    }
    assert all(a["role"] != b["role"] for a, b in zip(history, history[1:]))  # Converse's turns alternate
    events = EventLog(store).read(run_id)
    assert [e["text"] for e in events if e["type"] == ev.MESSAGE_RECEIVED] == ["Also check BUG-103 while you are at it."]
    assert int(store.get(run_id, keys.RUN_RECORD)[steering.INBOX_TAKEN]) == 1
    # Replayed in a new execution: the same transcript, the message taken once.
    sfn = stack.client("stepfunctions")
    arn = runs.resume(sfn, stack.state_machine_arn, run_id, force=True)
    assert wait_execution(sfn, arn)["status"] == "SUCCEEDED"
    assert transcript(store.get(run_id, keys.RUN_RECORD), store.steps(run_id)) == history


def test_a_message_to_a_finished_run_is_refused(stack, triage):
    run_scenario(stack, triage, RunOptions(run_id="steer-finished"))
    with pytest.raises(RunNotRunningError, match="run steer-finished is succeeded: nothing would read the message"):
        _steer(stack).send("steer-finished", "hello?")
    assert not _store(stack).query_prefix("steer-finished", keys.MESSAGE_PREFIX)


def test_a_pause_holds_no_compute_for_three_days_and_resume_continues(stack, triage):
    run_id = "steer-pause"
    clean = run_scenario(stack, triage, RunOptions(run_id="steer-pause-clean"))
    hook = _after_model_turn(stack, run_id, 4, lambda: _steer(stack).pause(run_id))
    background = Background(stack, triage, RunOptions(run_id=run_id))
    try:
        store = _store(stack)
        wait_until(
            "the run parked on Pause", lambda: any(i.task == "pause" and i.event.get("run_id") == run_id for i in stack.dispatcher.invocations)
        )
        assert (store.get(run_id, keys.RUN_RECORD) or {}).get(steering.PAUSE_TOKEN)
        sfn = stack.client("stepfunctions")
        arn = runs.latest_execution(sfn, stack.state_machine_arn, run_id)["executionArn"]
        invocations, history = len(stack.dispatcher.invocations), len(sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"])
        stack.clock.advance(THREE_DAYS)
        assert len(stack.dispatcher.invocations) == invocations  # 0 Lambda invocations while paused
        assert len(sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]) == history  # 0 transitions
        assert _steer(stack).resume(run_id) == "unpaused"
        report = background.result(120)
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    assert report["status"] == "SUCCEEDED"
    assert report["transcript_sha256"] != "" and live.story(EventLog(store).read(run_id))
    assert [e["type"] for e in EventLog(store).read(run_id) if e["type"] in (ev.RUN_PAUSED, ev.RUN_UNPAUSED)] == [ev.RUN_PAUSED, ev.RUN_UNPAUSED]
    assert report["effects"]["duplicate_effects"] == 0 and report["turns"] == clean["turns"]


def test_a_stop_cancels_the_calls_not_yet_run_and_a_stopped_run_resumes(stack, triage):
    run_id = "steer-stop"
    hook = _after_model_turn(stack, run_id, 3, lambda: _steer(stack).stop(run_id, "wrong ticket queue"))
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=run_id))
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    store = _store(stack)
    assert report["status"] == "SUCCEEDED"  # the execution ended cleanly, at a step boundary
    final = store.get(run_id, keys.FINAL_RECORD)
    output = final["output"] if isinstance(final["output"], dict) else __import__("json").loads(final["output"])
    assert (output["status"], output["stop_reason"], output["turns"]) == ("STOPPED", "wrong ticket queue", 4)
    for call in (0, 1):  # turn 3's two update_ticket calls were asked for and never ran
        result = store.get_step(run_id, keys.tool_step_key(3, call)).result
        assert result["status"] == "error" and result["content"]["cancelled"] is True
    assert store.get_step(run_id, keys.model_step_key(4)) is None  # nothing after the boundary
    types = [e["type"] for e in EventLog(store).read(run_id)]
    assert types[-2:] == [ev.RUN_STOPPED, ev.RUN_FINISHED] and "stop.requested" in types
    # A stopped run can be resumed: it goes on from where it stopped.
    arn = _steer(stack).resume(run_id)
    assert wait_execution(stack.client("stepfunctions"), arn)["status"] == "SUCCEEDED"
    assert store.get_step(run_id, keys.model_step_key(len(triage.turns) - 1)) is not None


def test_starting_a_running_run_id_follows_the_policy(stack, triage):
    run_id = "steer-double"
    payload = {"run_id": run_id, "agent": "triage", "goal": "a second goal for the same run"}
    outcomes = {}

    def double_text() -> None:
        steer = _steer(stack)
        with pytest.raises(RunIsRunningError, match="is running; send it a message"):
            steer.start(payload)
        outcomes["enqueue"] = steer.start(payload, "enqueue")

    hook = _after_model_turn(stack, run_id, 1, double_text)
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=run_id))
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    assert report["status"] == "SUCCEEDED" and outcomes == {"enqueue": "enqueued"}
    assert _store(stack).get_step(run_id, keys.model_step_key(2)).result["steering"] == ["a second goal for the same run"]
    with pytest.raises(RunIsRunningError, match="exists \\(succeeded\\); continue it with `longstep resume steer-double`"):
        _steer(stack).start(payload)


def test_an_interrupt_cancels_the_turns_calls_and_gives_the_model_the_new_input(stack, triage):
    run_id = "steer-interrupt"
    payload = {"run_id": run_id, "agent": "triage", "goal": "stop triaging; summarize what you have"}
    hook = _after_model_turn(stack, run_id, 3, lambda: _steer(stack).start(payload, "interrupt"))
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=run_id))
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    store = _store(stack)
    assert report["status"] == "SUCCEEDED"
    assert all(store.get_step(run_id, keys.tool_step_key(3, c)).result["content"]["cancelled"] for c in (0, 1))
    assert store.get_step(run_id, keys.model_step_key(4)).result["steering"] == [payload["goal"]]
    assert steering.INTERRUPT not in store.get(run_id, keys.RUN_RECORD)  # taken with the message


# -- crashes around steering: a fault at every point of the steered turn gives the clean result ---------

MESSAGE = "Also check BUG-103 while you are at it."


def _steered_run(stack, triage, name: str, faults: list, action: str):
    """The triage run from an empty world, steered once (a message after turn 2, or a pause after
    turn 4 resumed at once by a second hook), with ``faults``; returns its report and transcript.

    The same run id each time (its tools' ids derive from it), under another execution name: the
    steering is the runtime's (``longstep.steering``), which the CLI's running-run check sits on.
    """
    stack.reset_data()
    run_id = "steer-crash"
    hooks = []
    if action == "message":
        hooks.append(_after_model_turn(stack, run_id, 2, lambda: steering.send(_store(stack), run_id, MESSAGE)))
    elif action == "stop":
        hooks.append(_after_model_turn(stack, run_id, 3, lambda: steering.stop(_store(stack), run_id, "wrong queue")))
    elif action == "interrupt":  # start --if-running interrupt: the new goal as a message, the turn's calls cancelled

        def interrupt() -> None:
            steering.send(_store(stack), run_id, MESSAGE)
            steering.interrupt(_store(stack), run_id)

        hooks.append(_after_model_turn(stack, run_id, 3, interrupt))
    else:
        hooks.append(_after_model_turn(stack, run_id, 4, lambda: steering.pause(_store(stack), run_id)))

        def resume_when_parked(inv) -> None:
            if inv.task == "pause" and inv.error is None and inv.result.get("status") == "paused":
                steering.unpause(_store(stack), stack.client("stepfunctions"), run_id)

        stack.dispatcher.after_invoke.append(resume_when_parked)
        hooks.append(resume_when_parked)
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=run_id, execution_name=f"steer-crash-{name}", faults=faults))
    finally:
        for hook in hooks:
            stack.dispatcher.after_invoke.remove(hook)
    store = _store(stack)
    return report, transcript(store.get(run_id, keys.RUN_RECORD), store.steps(run_id)), live.story(EventLog(store).read(run_id))


@pytest.fixture(scope="module")
def steered_clean(stack, triage):
    return {action: _steered_run(stack, triage, f"clean-{action}", [], action) for action in ("message", "pause", "stop", "interrupt")}


# The steering is taken (a message) or acted on (a pause) by the model step: every point of it; and the
# first tool call after the message. (The exhaustive campaign over every point and turn of the
# unsteered run is tests/local/test_crash_campaign.py.)
# The suite keeps one point for each action; `make campaign` runs them all.
@pytest.mark.parametrize(
    "action,turn,point",
    campaign(
        [(a, t, p) for a, t in (("message", 3), ("pause", 5)) for p in ("before_model", "after_model", "after_record")]
        + [("message", 3, "before_tool"), ("message", 3, "after_effect")]
        # A stop after turn 3's reply: its calls are recorded as cancelled (a crash after the record, or
        # before the reply's record reached the state machine, replays them), then the run ends.
        + [("stop", 3, "after_record"), ("stop", 3, "after_tool")]
        # An interrupt after turn 3's reply: its calls cancelled, the message taken by turn 4's model step.
        + [("interrupt", 3, "after_tool"), ("interrupt", 4, "after_model"), ("interrupt", 4, "after_record")],
        {("message", 3, "after_model"), ("pause", 5, "after_record"), ("stop", 3, "after_tool"), ("interrupt", 4, "after_model")}.__contains__,
    ),
)
def test_a_crash_at_every_point_of_the_steered_turn_gives_the_clean_result(stack, triage, steered_clean, action, turn, point):
    from longstep_kit.local.faults import Fault

    clean_report, clean_transcript, clean_story = steered_clean[action]
    report, history, story = _steered_run(stack, triage, f"{action}-{point}", [Fault(point, turn)], action)
    assert report["status"] == "SUCCEEDED" and report["effects"]["duplicate_effects"] == 0
    assert report["transcript_sha256"] == clean_report["transcript_sha256"]
    assert history == clean_transcript and story == clean_story
    if action == "stop":
        assert report["output"] == clean_report["output"] and clean_report["turns"] == 4
    if action in ("message", "interrupt"):
        assert sum(1 for m in history for b in m["content"] if b.get("text") == steering.MESSAGE_PREFIX + MESSAGE) == 1
