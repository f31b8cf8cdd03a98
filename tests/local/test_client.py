"""The Python client on the local stack: start a run, follow its events while deciding its approvals
from them, send it a message, and read the same stream again from an offset."""

from __future__ import annotations

import threading

import json

from longstep import events as ev
from longstep import keys
from longstep_kit.client import Client
from longstep_kit.local.runner import start_input
from longstep_kit.local.world import check_and_seed
from longstep_kit.testing import RunOptions, wait_execution, wait_until


def test_a_client_starts_follows_steers_and_decides_a_run(stack, triage, tmp_path):
    client = Client(
        stack.client("stepfunctions"),
        stack.client("dynamodb"),
        stack.state_machine_arn,
        stack.outputs["CheckpointTableName"],
        stack.outputs["ApprovalsTableName"],
        who="test-client",
    )
    # The scenario's world seeded and its script staged, as `local run` does; then a plain start.
    check_and_seed(stack, triage, triage.name)
    payload = start_input(stack, triage, "client-run")
    seen, decided, sent = [], [], []
    with stack.clock.held():  # a person is deciding: the virtual clock must not skip to the approvals' timeout
        arn = client.start(payload)
        for event in client.follow("client-run", poll_seconds=0.05):
            seen.append(event)
            if event["type"] == ev.APPROVAL_REQUESTED:
                client.decide(event["approval_id"], "approve")
                decided.append(event["approval_id"])
            if event["type"] == ev.STEP_FINISHED and event.get("kind") == "model" and event["turn"] == 2 and not sent:
                sent.append(client.send("client-run", "Please mention BUG-103 in the summary."))
    assert wait_execution(stack.client("stepfunctions"), arn)["status"] == "SUCCEEDED"
    assert client.status("client-run") == "SUCCEEDED"
    assert len(decided) == 2 and sent == [0]
    assert [e["offset"] for e in seen] == list(range(len(seen)))
    assert seen == client.events("client-run")[: len(seen)]
    assert client.events("client-run", after=seen[9]["offset"]) == client.events("client-run")[10:]
    store = client._store
    assert any("steering" in s.result for s in store.steps("client-run") if s.kind == "model")
    assert client.approvals("client-run") == []
    assert json.loads(json.dumps(seen))  # every event is plain JSON
    assert store.get("client-run", keys.FINAL_RECORD) is not None


def test_the_follow_example_follows_a_run_to_its_end_and_its_message_is_taken(stack, triage, capsys):
    from tests.local.conftest import Background
    from tests.unit.test_examples import load_example

    example = load_example("examples/runs/follow_run.py")
    client = Client(stack.client("stepfunctions"), stack.client("dynamodb"), stack.state_machine_arn, stack.outputs["CheckpointTableName"])
    # The follower polls; on a loaded machine the run could finish before it sends the message
    # after turn 2. Turn 4's model call waits (bounded) until the message is in, as a slow model would.
    sent = threading.Event()
    send = client.send
    client.send = lambda *a, **k: (send(*a, **k), sent.set())[0]  # type: ignore[method-assign]

    def hold_turn_4(inv) -> None:
        if inv.task == "model_turn" and isinstance(inv.event, dict) and inv.event.get("next_turn") == 4:
            sent.wait(60)

    stack.dispatcher.before_invoke.append(hold_turn_4)
    try:
        background = Background(stack, triage, RunOptions(run_id="example-follow"))
        wait_until("the run's first event", lambda: client.events("example-follow"))
        seen = example.follow_and_steer(client, "example-follow", "Mention BUG-103 too.")
    finally:
        stack.dispatcher.before_invoke.remove(hold_turn_4)
    assert background.result()["status"] == "SUCCEEDED"
    assert [e["offset"] for e in seen] == list(range(len(seen))) and seen[-1]["type"] == ev.RUN_FINISHED
    assert "0 run.started" in capsys.readouterr().out
    steered = [s.result["steering"] for s in client._store.steps("example-follow") if s.kind == "model" and "steering" in s.result]
    assert steered == [["Mention BUG-103 too."]]
