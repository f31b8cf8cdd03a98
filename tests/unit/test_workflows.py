"""Workflows executed by replay on the in-memory store: recorded steps are not run again, replay
rules are enforced, waits suspend and resume, effects keep the tools' discipline."""

from __future__ import annotations

import pytest

from longstep import faults
from longstep.errors import NonDeterminismError, OutcomeUnknownError, UnknownWorkflowError
from longstep.humans.escalations import Resolution
from longstep.inmemory import InMemoryStore
from longstep.settings import SettingsError
from longstep.workflows import Call, StepFailedError, Workflow, WorkflowCatalog
from longstep.workflows import log
from longstep.workflows.definition import parse_workflows
from longstep.workflows.testing import replay_recorded, run_in_memory


class Counter:
    """Step functions that count how often they really ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def fn(self, name: str, result=None):
        def step(args, info):
            self.ran.append(name)
            return result if result is not None else {"step": name, "args": args}

        step.__name__ = name
        return step


def test_each_step_runs_once_across_every_invocation():
    c = Counter()

    def flow(ctx, inp):
        a = ctx.step(c.fn("build"), {"v": inp["v"]})
        b = ctx.step(c.fn("test"), a)
        return [a, b]

    run = run_in_memory(Workflow(flow), {"v": 3})
    assert run.status == log.DONE
    assert c.ran == ["build", "test"]
    # one invocation per step; the last one also returns the output
    assert run.invocations == 2
    assert run.output[1]["args"] == {"step": "build", "args": {"v": 3}}


def test_replaying_a_recorded_run_runs_no_step_again():
    c = Counter()

    def flow(ctx, inp):
        return [ctx.step(c.fn("one")), ctx.step(c.fn("two"))]

    first = run_in_memory(Workflow(flow))
    again = run_in_memory(Workflow(flow), store=first.store)
    assert again.output == first.output
    assert c.ran == ["one", "two"]


def test_changing_the_order_of_two_steps_raises_non_determinism_naming_both():
    c = Counter()

    def original(ctx, inp):
        ctx.step(c.fn("build"))
        ctx.step(c.fn("publish"))
        return "ok"

    def reordered(ctx, inp):
        ctx.step(c.fn("publish"))
        ctx.step(c.fn("build"))
        return "ok"

    recorded = run_in_memory(Workflow(original))
    assert replay_recorded(Workflow(original), recorded.store) == "ok"  # the unchanged code replays
    with pytest.raises(NonDeterminismError) as err:
        replay_recorded(Workflow(reordered), recorded.store)
    assert "recorded as step:build but the code now asks for step:publish" in str(err.value)
    assert c.ran == ["build", "publish"]  # replay ran nothing


def test_reordering_steps_of_an_unfinished_run_raises_non_determinism():
    c = Counter()
    store = InMemoryStore()

    def original(ctx, inp):
        ctx.step(c.fn("build"))
        ctx.step(c.fn("publish"))
        ctx.approval("ship")
        return "ok"

    def reordered(ctx, inp):
        ctx.step(c.fn("publish"))
        ctx.step(c.fn("build"))
        ctx.approval("ship")
        return "ok"

    with pytest.raises(_Stop):
        run_in_memory(Workflow(original), store=store, decisions=_StopAt("ship"))
    with pytest.raises(NonDeterminismError) as err:
        run_in_memory(Workflow(reordered), store=store)
    message = str(err.value)
    assert "step:build" in message and "step:publish" in message and "position 1" in message
    assert c.ran == ["build", "publish"]  # nothing ran during the failed replay


class _Stop(Exception):
    pass


class _StopAt(dict):
    """Decisions that stop the in-memory run when the named approval is asked for (a run left waiting)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def get(self, key, default=None):
        if key == self.name:
            raise _Stop(key)
        return default


def test_a_removed_trailing_step_is_non_determinism_too():
    store = InMemoryStore()
    c = Counter()

    def original(ctx, inp):
        ctx.step(c.fn("a"))
        ctx.step(c.fn("b"))
        ctx.approval("hold")
        return "ok"

    with pytest.raises(_Stop):
        run_in_memory(Workflow(original), store=store, decisions=_StopAt("hold"))

    def shorter(ctx, inp):
        ctx.step(c.fn("a"))
        return "ok"

    with pytest.raises(NonDeterminismError, match="recorded as step:b but the code now returns after position 1"):
        run_in_memory(Workflow(shorter), store=store)


def test_now_random_and_uuid_replay_their_first_values():
    seen: list[tuple] = []
    c = Counter()

    def flow(ctx, inp):
        values = (ctx.now(), ctx.random(), ctx.uuid())
        seen.append(values)
        ctx.step(c.fn("a"))
        ctx.sleep(hours=1)
        ctx.step(c.fn("b"))
        return list(values)

    run = run_in_memory(Workflow(flow))
    assert len(seen) == 2 and len(set(seen)) == 1  # both passes saw the same values
    assert run.output[0] == 1_800_000_000.0
    assert run.seconds == 3600


def test_a_sleep_is_one_directive_and_resumes_after_its_time():
    def flow(ctx, inp):
        ctx.sleep(days=2)
        return ctx.now()

    run = run_in_memory(Workflow(flow))
    waits = [d for d in run.directives if d["next"] == log.WAIT]
    assert waits == [{"next": log.WAIT, "seq": 1, "seconds": 2 * 86_400, "steps_executed": 0, "passes": 1}]
    assert run.output == 1_800_000_000.0 + 2 * 86_400


def test_a_rejected_approval_and_a_timed_out_event_reach_the_code():
    def flow(ctx, inp):
        decision = ctx.approval("publish", {"version": "1.0"})
        signal = ctx.wait_for("smoke-tests", timeout_seconds=600)
        return {"decision": decision["decision"], "signal": signal}

    run = run_in_memory(Workflow(flow), decisions={"publish": {"decision": "reject", "reason": "no"}})
    assert run.output == {"decision": "reject", "signal": None}
    approval = next(d for d in run.directives if d["next"] == log.APPROVE)
    assert approval["details"] == {"version": "1.0"} and approval["name"] == "publish"


def test_a_failed_step_is_recorded_and_raised_again_on_replay():
    attempts: list[int] = []

    def flaky(args, info):
        attempts.append(1)
        raise ValueError("build broke")

    def flow(ctx, inp):
        try:
            ctx.step(flaky)
        except StepFailedError as exc:
            failure = exc.error_type
        ctx.sleep(seconds=5)  # another invocation: the failure is replayed, not re-run
        return failure

    run = run_in_memory(Workflow(flow))
    assert run.output == "ValueError"
    assert attempts == [1]


def test_an_uncaught_failure_fails_the_run():
    def broken(args, info):
        raise RuntimeError("disk full")

    run = run_in_memory(Workflow(lambda ctx, inp: ctx.step(broken)))
    assert run.status == log.FAILED
    assert run.output["error"] == "StepFailedError" and "disk full" in run.output["cause"]


def test_a_suspension_cannot_be_swallowed_by_the_workflow():
    def flow(ctx, inp):
        try:
            ctx.sleep(seconds=10)
        except Exception:  # noqa: BLE001 - what a careless workflow does
            return "swallowed"
        return "slept"

    assert run_in_memory(Workflow(flow)).output == "slept"


def test_check_then_act_skips_the_act_when_the_check_finds_it_done():
    c = Counter()
    run = run_in_memory(
        Workflow(lambda ctx, inp: ctx.step(c.fn("act"), effect="check_then_act", check=lambda args, info: "already")),
    )
    assert run.output == "already" and c.ran == []


def test_at_most_once_interrupted_after_its_intent_is_outcome_unknown():
    c = Counter()
    crashed: list[str] = []

    def crash_once(point, run_id, turn, call):
        if point == faults.AFTER_EFFECT and not crashed:
            crashed.append(point)
            raise KeyboardInterrupt("crash")  # a killed invocation: nothing catches it

    flow = Workflow(lambda ctx, inp: ctx.step(c.fn("pay"), effect="at_most_once"))
    store = InMemoryStore()
    faults.set_hook(crash_once)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_in_memory(flow, store=store)
    finally:
        faults.set_hook(None)
    with pytest.raises(OutcomeUnknownError, match="pay"):
        run_in_memory(flow, store=store)
    assert c.ran == ["pay"]


def test_a_crash_after_the_record_replays_without_running_the_step_again():
    c = Counter()
    crashed: list[str] = []

    def crash_once(point, run_id, turn, call):
        if point == faults.AFTER_TOOL and not crashed:
            crashed.append(point)
            raise KeyboardInterrupt("crash")

    flow = Workflow(lambda ctx, inp: ctx.step(c.fn("publish"), effect="at_most_once"))
    store = InMemoryStore()
    faults.set_hook(crash_once)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_in_memory(flow, store=store)
    finally:
        faults.set_hook(None)
    assert run_in_memory(flow, store=store).status == log.DONE
    assert c.ran == ["publish"]


def test_parallel_branches_run_once_each_and_keep_their_order():
    c = Counter()

    def flow(ctx, inp):
        return ctx.parallel([Call(c.fn("x"), 1), Call(c.fn("y"), 2), Call(c.fn("z"), 3)])

    run = run_in_memory(Workflow(flow))
    assert [r["args"] for r in run.output] == [1, 2, 3]
    assert sorted(c.ran) == ["x", "y", "z"]
    branch_keys = [i["sk"] for i in run.store.query_prefix("workflow-test", log.STEP_PREFIX)]
    assert log.step_key(1, 2) in branch_keys and log.step_key(1) in branch_keys


def test_a_run_id_reused_with_another_input_is_refused():
    from longstep.errors import RunConflictError

    store = InMemoryStore()
    flow = Workflow(lambda ctx, inp: ctx.approval("x"))
    with pytest.raises(_Stop):
        run_in_memory(flow, {"v": 1}, store=store, decisions=_StopAt("x"))
    with pytest.raises(RunConflictError, match="input"):
        run_in_memory(flow, {"v": 2}, store=store)


def test_bad_calls_are_one_line_errors_naming_the_field():
    with pytest.raises(ValueError, match="effect"):
        Call(lambda a, i: None, effect="twice")
    with pytest.raises(ValueError, match="check"):
        Call(lambda a, i: None, effect="check_then_act")
    run = run_in_memory(Workflow(lambda ctx, inp: ctx.wait_for()))
    assert run.status == log.FAILED and run.output["error"] == "ValueError" and "wait_for" in run.output["cause"]


def test_the_catalog_names_the_workflows_that_exist():
    catalog = WorkflowCatalog({"release": "agents.release:build"})
    with pytest.raises(UnknownWorkflowError, match="workflow: unknown workflow 'nope'; registered workflows: release"):
        catalog("nope")
    with pytest.raises(SettingsError, match="LONGSTEP_WORKFLOWS"):
        parse_workflows("[1]")
    with pytest.raises(UnknownWorkflowError, match="not a Workflow"):
        WorkflowCatalog({"bad": "tests.unit.test_workflows:Counter"})("bad")


class _NoStepFunctions:
    """The task-token client resolve() hands the answer to (nothing waits in memory)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task_success(self, taskToken: str, output: str) -> None:  # noqa: N803 - boto3's names
        self.sent.append(output)


def _crash_after_effect_once(flow: Workflow, store: InMemoryStore) -> None:
    crashed: list[str] = []

    def crash_once(point, run_id, turn, call):
        if point == faults.AFTER_EFFECT and not crashed:
            crashed.append(point)
            raise KeyboardInterrupt("crash")

    faults.set_hook(crash_once)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_in_memory(flow, store=store)
    finally:
        faults.set_hook(None)


@pytest.mark.parametrize(
    "answer, ran, output",
    [
        (Resolution(action="retry", happened=False), ["pay", "pay"], {"step": "pay", "args": None}),
        (Resolution(action="skip", result={"paid": "by hand"}, happened=True), ["pay"], {"paid": "by hand"}),
    ],
)
def test_a_humans_answer_to_an_outcome_unknown_step_is_acted_on_once(answer, ran, output):
    from longstep.humans import waiting
    from longstep.humans.escalations import resolve
    from longstep.workflows.escalations import escalation_key, failed_position

    c = Counter()
    flow = Workflow(lambda ctx, inp: ctx.step(c.fn("pay"), effect="at_most_once"))
    store = InMemoryStore()
    _crash_after_effect_once(flow, store)
    assert failed_position(store, "workflow-test") == (1, None, "pay")
    waiting.park(store, "workflow-test", escalation_key(1, None), "token", {"task": "WorkflowStep", "error": "OutcomeUnknownError", "reason": "r"})
    resolve(store, _NoStepFunctions(), "workflow-test", 1, 0, answer)
    assert run_in_memory(flow, store=store).output == output
    assert c.ran == ran


def test_continue_as_new_hands_the_run_over_without_losing_a_wait_outcome():
    c = Counter()

    def flow(ctx, inp):
        ctx.step(c.fn("a"))
        go = ctx.wait_for("go")
        ctx.step(c.fn("b"))
        ctx.step(c.fn("c"))
        return go

    run = run_in_memory(Workflow(flow), signals={"go": {"n": 7}}, passes_per_execution=1)
    assert run.output == {"n": 7}
    # Pass 1 runs a and parks on the event; pass 2 records the signal, runs b and, past its one
    # pass, hands over; the next execution's first pass replays both and runs c.
    assert run.executions == 2
    assert c.ran == ["a", "b", "c"]
    assert [d["next"] for d in run.directives] == [log.SIGNAL, log.CONTINUE_AS_NEW, log.DONE]


def test_a_hand_over_starts_the_next_execution_on_the_version_this_one_runs():
    """Pinning: the next execution runs the code this one runs, whatever ``$$.StateMachine.Id`` names."""
    import json

    from longstep.runtime import Runtime
    from longstep.settings import Settings
    from longstep.steps import NoLock
    from longstep.workflows.tasks import hand_over

    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:Release"

    class Sfn:
        class exceptions:
            class ExecutionAlreadyExists(Exception):
                pass

        def __init__(self) -> None:
            self.described: list[str] = []
            self.started: list[tuple[str, str, dict]] = []

        def describe_execution(self, executionArn: str) -> dict:
            self.described.append(executionArn)
            return {"executionArn": executionArn, "stateMachineVersionArn": f"{machine}:4"}

        def start_execution(self, stateMachineArn: str, name: str, input: str) -> dict:
            self.started.append((stateMachineArn, name, json.loads(input)))
            return {"executionArn": f"{machine.replace(':stateMachine:', ':execution:')}:{name}"}

    sfn = Sfn()
    rt = Runtime(settings=Settings.from_env({}, required=()), store=InMemoryStore(), artifacts=None, lock=NoLock(), resolve_agent=None, sfn=sfn)  # type: ignore[arg-type]
    state = {"run_id": "rel-1", "workflow": "release", "input": {"v": 1}, "generation": 0}
    out = hand_over(rt, {"state": state, "state_machine_arn": machine, "execution_name": "rel-1"})
    assert sfn.described == [f"{machine.replace(':stateMachine:', ':execution:')}:rel-1"]
    ((arn, name, payload),) = sfn.started
    assert arn == f"{machine}:4" and payload["generation"] == 1 and out["generation"] == 1
    assert name == out["continued_as"].rsplit(":", 1)[1]
