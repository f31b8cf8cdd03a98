"""The history checker (local/history.py) against a real ``longstep local serve``: the stack runs in
a process of its own, and every client is another thread's boto3 over HTTP to the served endpoint
(signed requests, as any SDK's; the serve's token is for its control routes, and the stack it
serves runs on real time).

Three senders signal one run of ``tests/fixtures/wait_four.json`` (four waits on one event; one
sender sends twice, one after the other) and a steering client sends two messages, all at once.
Each signal must reach one wait, in the order sent, each message one model turn, and a second
run on the same serve given the signals in the order they were taken (and each message before the
turn that took it) must have the same transcript. A task token takes one answer: a second, sent
from this process (which has none of the local stack's client-side checks), is ``TaskTimedOut``.
"""

from __future__ import annotations

import json
import threading

import pytest
from botocore.exceptions import ClientError

from longstep import keys, steering
from longstep.humans import signals
from longstep.messages import transcript_sha256
from longstep.store import CheckpointStore
from longstep.transcript import transcript
from longstep_kit.local.history import History, Observed, check
from tests.local.conftest import Served, until

EVENT = "ci_finished"


class Run:
    """One run of the served scenario, driven and read over HTTP."""

    def __init__(self, served: Served, run_id: str) -> None:
        self.served, self.run_id = served, run_id
        self.sfn = served.client("stepfunctions")
        self.store = CheckpointStore(served.outputs()["CheckpointTableName"], served.client("dynamodb"))
        machine = self.sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]
        payload = {**json.loads(served.start.read_text()), "run_id": run_id}
        self.arn = self.sfn.start_execution(stateMachineArn=machine, name=run_id, input=json.dumps(payload))["executionArn"]

    def parked(self, n: int) -> None:
        """Wait until the run's n-th wait (from 0) has parked on the event."""

        def waiting() -> bool:
            head = self.store.get(self.run_id, keys.signal_key(EVENT)) or {}
            turns = [s for s in self.store.steps(self.run_id) if s.kind == "model"]
            return len(turns) == n + 1 and bool(signals.waiters(head))

        until(waiting, f"{self.run_id}: wait {n} parked", 120)

    def send(self, payload: object) -> str:
        return signals.deliver(self.store, self.sfn, self.run_id, EVENT, payload)

    def finished(self) -> dict:
        return until(lambda: (d := self.sfn.describe_execution(executionArn=self.arn))["status"] != "RUNNING" and d, f"{self.run_id} to end", 180)

    def observed(self) -> tuple[list[tuple[str, object]], list[tuple[int, str]], str]:
        """The signals its waits took, the messages its turns took (in turn order), its transcript hash."""
        steps = self.store.steps(self.run_id)
        taken = [(EVENT, s.result["content"].get("payload")) for s in steps if s.kind == "tool" and s.result["status"] == "success"]
        messages = [(int(s.sk.split("#")[1]), text) for s in steps if s.kind == "model" for text in s.result.get("steering") or []]
        run = self.store.get(self.run_id, keys.RUN_RECORD) or {}
        return taken, messages, transcript_sha256(transcript({"goal": run["goal"]}, steps))


def test_clients_of_a_served_stack_over_http_keep_every_rule(serve):
    served = serve(scenario="tests/fixtures/wait_four.json", run_id="served-history")
    history = History()
    payloads = {"a": [{"a": 1}, {"a": 2}], "b": [{"b": 1}], "c": [{"c": 1}]}
    texts = ["check the flaky test first", "then the deploy"]
    race = Run(served, "served-history")
    race.parked(0)  # every message goes to a later model turn

    def sender(name: str) -> None:
        for payload in payloads[name]:  # one after the other: the second must be taken after the first
            history.call(name, "signal", EVENT, payload, lambda p=payload: race.send(p))

    def steerer() -> None:
        for text in texts:
            history.call("m", "steer", race.run_id, text, lambda t=text: steering.send(race.store, race.run_id, t, sender="m"))

    threads = [threading.Thread(target=sender, args=(n,)) for n in payloads] + [threading.Thread(target=steerer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert race.finished()["status"] == "SUCCEEDED"
    taken, messages, sha = race.observed()
    assert sorted(map(json.dumps, (p for _, p in taken))) == sorted(json.dumps(p) for ps in payloads.values() for p in ps)

    serial = Run(served, "served-serial")  # the same scenario on the same serve, one client at a time
    for wait, (_, payload) in enumerate(taken):
        serial.parked(wait)
        for turn, text in messages:
            if turn == wait + 1:
                steering.send(serial.store, serial.run_id, text)
        assert serial.send(payload) == signals.DELIVERED
    assert serial.finished()["status"] == "SUCCEEDED"
    serial_taken, serial_messages, serial_sha = serial.observed()
    assert (serial_taken, serial_messages) == (taken, messages)
    observed = Observed(deliveries=taken, messages=messages, transcript=sha, serial_transcript=serial_sha)
    assert check(history, observed) == []

    # One answer per task token, whoever sends it: this process has no client-side check, and moto
    # took a second answer and kept it (with two senders at once, the first signal was lost).
    twice = Run(served, "served-twice")
    twice.parked(0)
    ((_, token, _),) = signals.waiters(twice.store.get(twice.run_id, keys.signal_key(EVENT)))
    twice.sfn.send_task_success(taskToken=token, output=json.dumps({"payload": {"n": 1}}))
    with pytest.raises(ClientError) as second:
        twice.sfn.send_task_success(taskToken=token, output=json.dumps({"payload": {"n": 2}}))
    assert second.value.response["Error"]["Code"] == "TaskTimedOut"
    code, out = served.stop()
    assert code == 0 and "Traceback" not in out, out[-3000:]
