"""Subagents: the child run id, the limits, the routing of a delegated call, the scripts of
scripted children, and DelegateToSubagent against a child that finishes before or after the
call parks (in memory, with a fake Step Functions client)."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from longstep import keys
from longstep.agent import Agent
from longstep.environment import use_environment
from longstep.errors import InvalidInputError, ToolInputError, UnknownAgentError
from longstep.inmemory import InMemoryStore
from longstep.inputs import MAX_RUN_ID, RUN_ID_PATTERN, StartInput, parse_model
from longstep.contract.call import CallItem
from longstep.models.scripted import ScriptedProvider
from longstep.runtime import Runtime
from longstep.settings import Settings
from longstep.steps import NoLock
from longstep.subagents import (
    ENV_MAX_CHILDREN,
    ENV_MAX_DEPTH,
    SubagentArgs,
    SubagentLimits,
    child_key,
    child_run_id,
    child_script_uri,
    delegate_result,
    routing,
)
from longstep import child_runs
from longstep.tasks import child_failed, delegate_to_subagent
from longstep.tools.registry import ToolContext, ToolRegistry

PARENT = "lead-1"
SM = "arn:aws:states:us-east-1:123456789012:stateMachine:Loop"


# --- ids, limits, routing --------------------------------------------------------------------


def test_the_child_run_id_names_the_parent_turn_and_call():
    assert child_run_id(PARENT, 3, 1) == "lead-1-t3c1"
    assert child_run_id(PARENT, 3, 1) == child_run_id(PARENT, 3, 1)  # a retried step finds the same child
    assert len({child_run_id(PARENT, t, c) for t in range(3) for c in range(3)}) == 9


def test_a_long_parent_id_is_cut_and_hashed_into_a_valid_run_id():
    long_a, long_b = "a" * MAX_RUN_ID, "a" * (MAX_RUN_ID - 1) + "b"
    child_a, child_b = child_run_id(long_a, 12, 3), child_run_id(long_b, 12, 3)
    assert len(child_a) == MAX_RUN_ID and RUN_ID_PATTERN.fullmatch(child_a) and child_a.endswith("-t12c3")
    assert child_a != child_b  # same head, different parents


def test_limits_refuse_past_the_depth_and_the_count():
    limits = SubagentLimits(max_depth=2, max_children=2)
    assert limits.refusal(parent_depth=0, ordinal=0) is None
    assert limits.refusal(parent_depth=1, ordinal=1) is None
    assert "depth" in limits.refusal(parent_depth=2, ordinal=0)
    assert "already started 2" in limits.refusal(parent_depth=0, ordinal=2)


def test_limits_come_from_the_functions_environment():
    with use_environment({ENV_MAX_DEPTH: "1", ENV_MAX_CHILDREN: "5"}):
        assert SubagentLimits.from_env() == SubagentLimits(max_depth=1, max_children=5)
    with use_environment({ENV_MAX_DEPTH: "many"}):
        with pytest.raises(ValueError, match=ENV_MAX_DEPTH):
            SubagentLimits.from_env()


def test_only_a_valid_call_to_a_declared_subagent_is_routed_to_delegation():
    use = {"name": "research", "input": {"goal": "why?"}}
    assert routing(("research",), use) == {"wait": "subagent", "subagent": "research"}
    assert routing((), use) is None
    assert routing(("research",), {"name": "research", "input": {"goal": ""}}) is None  # CallTool tells the model


def test_an_agent_sees_each_subagent_as_a_tool_and_a_clash_is_refused():
    agent = Agent(name="lead", system_prompt="s", tools=ToolRegistry(), subagents=("research",))
    spec = agent.tools.get("research").tool_spec()["toolSpec"]
    assert set(spec["inputSchema"]["json"]["properties"]) == {"goal", "inputs"}
    with pytest.raises(ValueError, match="subagents"):
        Agent(name="lead", system_prompt="s", tools=ToolRegistry(), subagents=("wait_for",))


def test_a_start_input_carries_the_parent_link_checked():
    ok = {"run_id": "c", "goal": "g", "agent": "research", "parent": {"run_id": PARENT, "turn": 0, "call": 1, "depth": 1}}
    assert parse_model(StartInput, ok, "start input").parent.call == 1
    with pytest.raises(InvalidInputError, match="parent.depth"):
        parse_model(StartInput, {**ok, "parent": {**ok["parent"], "depth": 0}}, "start input")


def test_a_scripted_childs_script_is_the_entry_of_its_call():
    uri = "s3://bucket/artifacts/abc"
    assert child_script_uri(uri, "t0c1") == f"{uri}#t0c1"
    assert child_script_uri(f"{uri}#t0c1", "t2c0") == f"{uri}#t0c1/t2c0"
    parent = ScriptedProvider.from_json(
        json.dumps(
            {
                "turns": {"0": {"text": "p"}},
                "children": {"t0c1": {"turns": {"0": {"text": "c"}}, "children": {"t2c0": {"turns": {"0": {"text": "g"}}}}}},
            }
        )
    )
    assert parent.child("t0c1").script.turns[0].text == "c"
    assert parent.child("t0c1/t2c0").script.turns[0].text == "g"
    with pytest.raises(InvalidInputError, match="t9c9"):
        parent.child("t9c9")


def _ctx(child):
    item = CallItem(run_id=PARENT, turn=0, call=0, tool="research", wait="subagent", subagent="research", child=child)
    return ToolContext(run_id=PARENT, turn=0, call=0, idempotency_key="k", item=item)


def test_the_tool_result_is_the_childs_answer_or_what_stopped_it():
    args = SubagentArgs(goal="why?")
    done = {"run_id": "c", "status": "SUCCEEDED", "output": "found it", "turns": 2, "stop": "end_turn"}
    assert delegate_result(args, _ctx(done)) == {"run_id": "c", "status": "SUCCEEDED", "output": "found it", "turns": 2}
    for child, phrase in (
        ({"refused": "subagent limit reached"}, "limit"),
        ({"timed_out": True}, "in time"),
        ({"Error": "SubagentFailed", "Cause": "aborted"}, "failed: aborted"),
    ):
        with pytest.raises(ToolInputError, match=phrase):
            delegate_result(args, _ctx(child))


def test_inputs_are_shown_with_the_goal():
    assert SubagentArgs(goal="g").child_goal() == "g"
    assert SubagentArgs(goal="g", inputs={"b": 1, "a": 2}).child_goal() == 'g\n\nInputs:\n{"a": 2, "b": 1}'


# --- DelegateToSubagent and the child's answer ----------------------------------------------


class FakeStepFunctions:
    """Starts executions by name (a taken name raises ExecutionAlreadyExists) and records what
    each task token was sent; ``closed`` tokens answer TaskTimedOut, as a retried task's do."""

    class exceptions:
        class ExecutionAlreadyExists(Exception):
            pass

    def __init__(self) -> None:
        self.started: list[tuple[str, dict]] = []
        self.sent: list[tuple[str, str, object]] = []
        self.closed: set[str] = set()
        self.started_on: list[str] = []  # the ARN each start named
        self.described: list[str] = []

    def describe_execution(self, executionArn: str) -> dict:
        self.described.append(executionArn)
        return {"executionArn": executionArn, "stateMachineVersionArn": f"{SM}:7"}  # the parent runs version 7

    def start_execution(self, stateMachineArn: str, name: str, input: str) -> dict:
        self.started_on.append(stateMachineArn)
        if any(n == name for n, _ in self.started):
            raise self.exceptions.ExecutionAlreadyExists(name)
        self.started.append((name, json.loads(input)))
        return {"executionArn": f"{SM}:{name}"}

    def _send(self, token: str, kind: str, body: object) -> None:
        if token in self.closed:
            raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "closed"}}, "SendTaskSuccess")
        self.sent.append((token, kind, body))

    def send_task_success(self, taskToken: str, output: str) -> None:
        self._send(taskToken, "success", json.loads(output))

    def send_task_failure(self, taskToken: str, error: str, cause: str) -> None:
        self._send(taskToken, "failure", {"error": error, "cause": cause})


AGENTS = {
    "lead": Agent(name="lead", system_prompt="s", tools=ToolRegistry(), subagents=("research", "ghost")),
    "research": Agent(name="research", system_prompt="s", tools=ToolRegistry()),
}


def _resolve(name: str) -> Agent:
    if name not in AGENTS:
        raise UnknownAgentError(f"agent: {name}")
    return AGENTS[name]


@pytest.fixture
def rt():
    store = InMemoryStore()
    store.put_once(PARENT, keys.RUN_RECORD, {"agent": "lead", "goal": "g", "model": json.dumps({"provider": "scripted", "script_uri": "s3://b/k"})})
    calls = [
        {"toolUse": {"toolUseId": f"t0c{i}", "name": name, "input": {"goal": f"q{i}"}}} for i, name in enumerate(("research", "research", "ghost"))
    ]
    store.record_step(PARENT, keys.model_step_key(0), "model", "converse", {"message": {"role": "assistant", "content": calls}})
    return Runtime(
        settings=Settings.from_env({}, required=()), store=store, artifacts=None, lock=NoLock(), resolve_agent=_resolve, sfn=FakeStepFunctions()
    )  # type: ignore[arg-type]


def _event(call: int, token: str, tool: str = "research") -> dict:
    item = {"run_id": PARENT, "turn": 0, "call": call, "tool": tool, "wait": "subagent", "subagent": tool}
    return {"item": item, "token": token, "state_machine_arn": SM, "execution_name": PARENT}


def _finish_child(rt, call: int, output: str = "answer") -> None:
    child = {"parent": json.dumps({"run_id": PARENT, "turn": 0, "call": call, "depth": 1})}
    child_runs.answer_parent(rt, child, {"run_id": child_run_id(PARENT, 0, call), "status": "SUCCEEDED", "output": output})


def test_a_call_starts_its_child_with_the_parent_link_and_the_childs_script(rt):
    out = delegate_to_subagent.delegate(rt, _event(1, "tok-1"))
    assert out["status"] == "running" and out["child_run_id"] == "lead-1-t0c1"
    ((name, start),) = rt.sfn.started
    assert name == "lead-1-t0c1" and start["run_id"] == name and start["agent"] == "research"
    assert start["parent"] == {"run_id": PARENT, "turn": 0, "call": 1, "depth": 1}
    assert start["model"] == {"provider": "scripted", "script_uri": "s3://b/k#t0c1"}
    parse_model(StartInput, start, "start input")  # the child's start input is valid
    assert rt.store.get(PARENT, child_key(0, 1))["task_token"] == "tok-1"
    # On the version the parent's own execution runs: a deploy meanwhile does not change the child's code.
    assert rt.sfn.described == [SM.replace(":stateMachine:", ":execution:") + f":{PARENT}"]
    assert rt.sfn.started_on == [f"{SM}:7"]


def test_a_retried_call_reattaches_and_the_child_answers_the_newest_token(rt):
    delegate_to_subagent.delegate(rt, _event(0, "tok-1"))
    rt.sfn.closed.add("tok-1")  # the attempt crashed after the start; Step Functions retried the task
    delegate_to_subagent.delegate(rt, _event(0, "tok-2"))
    assert [n for n, _ in rt.sfn.started] == ["lead-1-t0c0"]  # the same child, not a second one
    _finish_child(rt, 0)
    assert rt.sfn.sent == [("tok-2", "success", {"run_id": "lead-1-t0c0", "status": "SUCCEEDED", "output": "answer"})]
    _finish_child(rt, 0)  # a retried Finish: the token already took the answer (TaskTimedOut is ignored)
    rt.sfn.closed.add("tok-2")
    _finish_child(rt, 0)
    assert len(rt.sfn.sent) == 2 and rt.sfn.sent[1][0] == "tok-2"


def test_a_call_parked_after_its_child_finished_takes_the_recorded_answer(rt):
    delegate_to_subagent.delegate(rt, _event(0, "tok-1"))
    rt.sfn.closed.add("tok-1")  # e.g. the parent restarted while the child ran
    _finish_child(rt, 0, "early")
    assert rt.sfn.sent == []  # tok-1 was no longer waiting
    out = delegate_to_subagent.delegate(rt, _event(0, "tok-2"))
    assert out["status"] == "done" and rt.sfn.sent == [("tok-2", "success", {"run_id": "lead-1-t0c0", "status": "SUCCEEDED", "output": "early"})]
    assert len(rt.sfn.started) == 1


def test_a_failed_child_answers_with_a_task_failure(rt):
    delegate_to_subagent.delegate(rt, _event(0, "tok-1"))
    child = {"parent": json.dumps({"run_id": PARENT, "turn": 0, "call": 0, "depth": 1})}
    rt.store.put_once("lead-1-t0c0", keys.RUN_RECORD, {"agent": "research", "goal": "q0", "model": "{}", **child})
    child_failed.child_failed(rt, {"run_id": "lead-1-t0c0", "error": {"Error": "EscalationAborted"}})
    ((token, kind, body),) = rt.sfn.sent
    assert (token, kind, body["error"]) == ("tok-1", "failure", "SubagentFailed") and "aborted" in body["cause"]
    assert child_runs.children(rt.store, PARENT) == [
        {"turn": 0, "call": 0, "subagent": "research", "child_run_id": "lead-1-t0c0", "status": "failed"}
    ]


def test_the_limits_refuse_a_call_at_once_and_the_same_on_every_attempt(rt):
    with use_environment({ENV_MAX_CHILDREN: "1"}):
        assert delegate_to_subagent.delegate(rt, _event(0, "tok-a"))["status"] == "running"
        for token in ("tok-b", "tok-c"):
            assert delegate_to_subagent.delegate(rt, _event(1, token))["status"] == "refused"
    assert [n for n, _ in rt.sfn.started] == ["lead-1-t0c0"]
    refusals = [(t, body["refused"]) for t, kind, body in rt.sfn.sent]
    assert [t for t, _ in refusals] == ["tok-b", "tok-c"] and all("limit" in r for _, r in refusals)


def test_a_subagent_that_is_not_deployed_is_refused(rt):
    assert delegate_to_subagent.delegate(rt, _event(2, "tok-1", tool="ghost"))["status"] == "refused"
    assert "no agent named 'ghost'" in rt.sfn.sent[0][2]["refused"]


def test_a_call_to_a_tool_that_is_not_a_subagent_is_malformed(rt):
    rt.store.record_step(
        PARENT,
        keys.model_step_key(1),
        "model",
        "converse",
        {"message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "x", "name": "wait_for", "input": {}}}]}},
    )
    event = _event(0, "tok")
    event["item"].update(turn=1, tool="wait_for")
    with pytest.raises(InvalidInputError, match="not a subagent"):
        delegate_to_subagent.delegate(rt, event)


# --- scenarios -----------------------------------------------------------------------------------


def test_a_scenarios_subagent_scripts_go_under_children_and_are_checked_against_its_calls():
    from longstep_kit.local.scenario import Scenario, ScenarioError, check_against_agent

    base = {
        "name": "d",
        "input": {"goal": "g", "agent": "lead"},
        "turns": {"0": {"tool_calls": [{"name": "research", "input": {"goal": "q"}}]}, "1": {"text": "done"}},
    }
    plain = Scenario.model_validate(base)
    assert "children" not in plain.script()  # a scenario without subagents keeps the script (and its hash) it had
    child = {"turns": {"0": {"text": "found"}}}
    scenario = Scenario.model_validate({**base, "subagents": {"t0c0": child}})
    assert scenario.script()["children"] == {"t0c0": {"turns": {"0": {"text": "found", "input_tokens": 100, "output_tokens": 50, "tool_calls": []}}}}
    check_against_agent(scenario, AGENTS["lead"])
    wrong = Scenario.model_validate({**base, "subagents": {"t1c0": child}})
    with pytest.raises(ScenarioError, match="subagents.t1c0"):
        check_against_agent(wrong, AGENTS["lead"])


# --- the deadline --------------------------------------------------------------------------------


def test_a_deadline_needs_a_time_zone():
    base = {"run_id": "r", "goal": "g", "agent": "research"}
    assert parse_model(StartInput, {**base, "deadline": "2026-12-01T09:00:00Z"}, "start input").deadline.tzinfo is not None
    with pytest.raises(InvalidInputError, match="deadline"):
        parse_model(StartInput, {**base, "deadline": "2026-12-01T09:00:00"}, "start input")


def test_a_child_inherits_its_parents_deadline(rt):
    rt.store.update(PARENT, keys.RUN_RECORD, {"deadline": "1764579600.0"})  # 2025-12-01T09:00:00Z
    delegate_to_subagent.delegate(rt, _event(0, "tok-1"))
    ((_, start),) = rt.sfn.started
    assert parse_model(StartInput, start, "start input").deadline.timestamp() == 1764579600.0


def _deadline_runtime(deadline: str) -> Runtime:
    from longstep.tasks.init_run import start_run

    script = ScriptedProvider.from_json(json.dumps({"turns": {"0": {"tool_calls": [{"name": "search", "input": {}}]}, "1": {"text": "done"}}}))
    agent = Agent(name="research", system_prompt="s", tools=ToolRegistry())
    runtime = Runtime(
        settings=Settings.from_env({}, required=()),
        store=InMemoryStore(),
        artifacts=None,
        lock=NoLock(),
        resolve_agent=lambda _: agent,
        model_override=script,
    )  # type: ignore[arg-type]
    start_run(runtime, {"run_id": "d", "goal": "g", "agent": "research", "deadline": deadline})
    return runtime


def test_no_model_turn_starts_after_the_deadline_but_a_recorded_one_replays():
    from longstep import clock
    from longstep.tasks.model_turn import model_turn

    rt = _deadline_runtime("2025-12-01T09:00:00Z")
    cursor = {"run_id": "d", "next_turn": 0}
    with clock.use_source(lambda: 1764579600.0 - 1):  # a second before: the turn runs
        assert model_turn(rt, cursor)["route"] == "tool"  # its one call waits for nothing: CallOneTool
    with clock.use_source(lambda: 1764579600.0 + 1):
        replayed = model_turn(rt, cursor)  # recorded before the deadline: replayed the same
        assert (replayed["route"], replayed["replayed"]) == ("tool", True)
        stopped = model_turn(rt, {"run_id": "d", "next_turn": 1})
        assert (stopped["route"], stopped["stop"]) == ("done", "deadline")
