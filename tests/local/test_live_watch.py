"""A run's event stream on the local stack: ``longstep watch --output json`` during a scripted run
gets every event in order with contiguous offsets (the model's text streamed in pieces), a follower
that drops and comes back with its last offset gets exactly what it missed, and under crashes the
events that count (superseded attempts left out) tell the clean run's story."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from longstep import events as ev
from longstep import keys
from longstep.events import EventLog
from longstep.messages import text_of, tool_uses
from longstep.store import CheckpointStore
from longstep_kit.cli import main
from longstep_kit.local.faults import random_faults
from longstep_kit.ops import live
from longstep_kit.testing import RunOptions, run_scenario, wait_until
from tests.local.conftest import Background
from tests.conftest import campaign


def _log(stack) -> EventLog:
    return EventLog(CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb")))


def _watch(stack, *argv: str) -> tuple[int, list[dict]]:
    out = io.StringIO()
    targets = ["--state-machine-arn", stack.state_machine_arn, "--checkpoint-table", stack.outputs["CheckpointTableName"]]
    with contextlib.redirect_stdout(out):
        code = main(["watch", *argv, *targets, "--output", "json", "--poll-seconds", "0.05"])
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def clean(stack, triage):
    run_scenario(stack, triage, RunOptions(run_id="live-clean"))
    return _log(stack).read("live-clean")


def test_watch_during_the_run_gets_every_event_in_order_and_exits_as_status(stack, triage):
    sfn = stack.client("stepfunctions")
    background = Background(stack, triage, RunOptions(run_id="live-watched"))
    wait_until(
        "the run's execution",
        lambda: sfn.list_executions(stateMachineArn=stack.state_machine_arn, statusFilter="RUNNING")["executions"] or background.report,
    )
    code, lines = _watch(stack, "live-watched")
    report = background.result()
    assert report["status"] == "SUCCEEDED" and code == 0
    *events, ended = lines
    assert ended == {"type": "watch.ended", "run_id": "live-watched", "status": "succeeded", "execution_status": "SUCCEEDED", "reason": None}
    assert [e["offset"] for e in events] == list(range(len(events)))
    assert all({"offset", "type", "at"} <= set(e) for e in events)
    assert events == _log(stack).read("live-watched")  # what was printed is the whole stream
    types = [e["type"] for e in events]
    assert types[0] == ev.RUN_STARTED and types[-1] == ev.RUN_FINISHED
    assert {ev.MODEL_DELTA, ev.STEP_FINISHED, ev.APPROVAL_REQUESTED, ev.APPROVAL_DECIDED} <= set(types)
    # The model's text arrives in pieces, and the pieces are the recorded reply.
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    last = len(triage.turns) - 1
    pieces = [e["text"] for e in events if e["type"] == ev.MODEL_DELTA and e["step"] == ev.step_name(last)]
    assert len(pieces) > 1
    assert "".join(pieces) == text_of(store.get_step("live-watched", keys.model_step_key(last)).result["message"])


def test_a_follower_that_drops_gets_exactly_what_it_missed(stack, clean):
    follower = live.follow(_log(stack), "live-clean", lambda: "SUCCEEDED")
    seen = [next(follower) for _ in range(11)]
    follower.close()  # the connection drops after offset 10
    code, lines = _watch(stack, "live-clean", "--from", str(seen[-1]["offset"]))
    resumed = [e for e in lines if "offset" in e]
    assert code == 0
    assert seen + resumed == clean
    assert resumed[0]["offset"] == seen[-1]["offset"] + 1


def test_watch_of_an_unknown_run_is_one_line_and_exit_2(stack, capsys):
    targets = ["--state-machine-arn", stack.state_machine_arn, "--checkpoint-table", stack.outputs["CheckpointTableName"]]
    assert main(["watch", "nobody-here", *targets]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: run_id: no run named 'nobody-here'") and "\n" not in err


def _recorded_story(stack, run_id: str) -> list[live.StoryLine]:
    """The story the recorded steps tell (the truth the stream must agree with)."""
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    lines, uses = [], {}
    for step in store.steps(run_id):
        key = keys.parse(step.sk)
        if step.kind == "model":
            calls = tool_uses(step.result["message"])
            uses[key.turn] = calls
            lines.append(live.StoryLine("model", key.turn, None, text_of(step.result["message"]), tuple(c["name"] for c in calls)))
        else:
            use = uses[key.turn][key.call]
            lines.append(live.StoryLine("tool", key.turn, key.call, "", (use["name"],), use["input"], step.result["status"], step.result["content"]))
    return lines


@pytest.mark.parametrize("seed", campaign([3, 7, 11], (7).__eq__))  # `make campaign` runs every seed
def test_under_crashes_the_events_that_count_tell_the_clean_runs_story(stack, triage, seed):
    stories = {}
    for name, faults in (("clean", []), ("faulted", random_faults("random:10", seed, len(triage.turns)))):
        stack.reset_data()  # the same run id from an empty world: the same ids in the tools' results
        report = run_scenario(stack, triage, RunOptions(run_id="live-faults", execution_name=f"live-faults-{name}-{seed}", faults=faults))
        assert report["status"] == "SUCCEEDED"
        events = _log(stack).read("live-faults")
        assert [e["offset"] for e in events] == list(range(len(events)))
        stories[name] = live.story(events)
        assert stories[name] == _recorded_story(stack, "live-faults")
    assert stories["faulted"] == stories["clean"]
    # The crashed attempts' events are in the stream, and marked: the follower saw them, then was told.
    assert any(e["type"] == ev.STEP_SUPERSEDED for e in events)
    assert len(live.visible(events)) < len(events)
