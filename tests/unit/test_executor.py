"""execute_call: model mistakes become error results; effect classes decide what a re-run does."""

import pytest
from botocore.exceptions import ClientError
from pydantic import BaseModel

from longstep import keys
from longstep.errors import OutcomeUnknownError, ThrottledError, ToolInputError
from longstep.store import AlreadyRecordedError
from longstep.tools.executor import execute_call, failure, success
from longstep.tools.registry import Effect, ProbeAnswer, Tool, ToolContext, ToolRegistry


class FakeStore:
    """Only what the executor uses: put_once and get on (run_id, sk)."""

    def __init__(self):
        self.records = {}

    def put_once(self, run_id, sk, attrs):
        if (run_id, sk) in self.records:
            raise AlreadyRecordedError(sk)
        self.records[(run_id, sk)] = attrs

    def get(self, run_id, sk):  # an intent marker read back: whose attempt wrote it
        return self.records.get((run_id, sk))


class Args(BaseModel):
    n: int


CTX = ToolContext(run_id="r", turn=2, call=1, idempotency_key="r:2:1")


def registry_with(**kw):
    calls = []

    def fn(args, ctx):
        calls.append((args.n, ctx.idempotency_key))
        return {"n": args.n * 2}

    reg = ToolRegistry()
    reg.register(Tool(name="t", description="d", args_model=Args, fn=kw.pop("fn", fn), **kw))
    return reg, calls


def test_success_runs_the_tool_with_parsed_args_and_context():
    reg, calls = registry_with()
    assert execute_call(reg, FakeStore(), CTX, "t", {"n": 3}) == success({"n": 6})
    assert calls == [(3, "r:2:1")]


def test_unknown_tool_is_an_error_result_naming_available_tools():
    reg, calls = registry_with()
    result = execute_call(reg, FakeStore(), CTX, "nope", {"n": 1})
    assert result["status"] == "error"
    assert result["content"]["kind"] == "UnknownToolError"
    assert "t" in result["content"]["error"].split("available: ")[1]
    assert calls == []


def test_bad_arguments_are_an_error_result_naming_the_field():
    reg, calls = registry_with()
    result = execute_call(reg, FakeStore(), CTX, "t", {"n": "x"})
    assert result["status"] == "error"
    assert result["content"]["kind"] == "ToolArgumentsError"
    assert "n:" in result["content"]["error"]
    assert calls == []


def test_tool_input_error_from_the_tool_is_told_to_the_model():
    def fn(args, ctx):
        raise ToolInputError("n: no such thing")

    reg, _ = registry_with(fn=fn)
    result = execute_call(reg, FakeStore(), CTX, "t", {"n": 1})
    assert result == failure("n: no such thing", kind="ToolInputError")


def test_check_then_act_skips_the_act_when_check_finds_it_done():
    reg, calls = registry_with(effect=Effect.CHECK_THEN_ACT, check=lambda args, ctx: {"already": True})
    assert execute_call(reg, FakeStore(), CTX, "t", {"n": 1}) == success({"already": True})
    assert calls == []


def test_check_then_act_acts_when_check_returns_none():
    reg, calls = registry_with(effect=Effect.CHECK_THEN_ACT, check=lambda args, ctx: None)
    assert execute_call(reg, FakeStore(), CTX, "t", {"n": 1}) == success({"n": 2})
    assert len(calls) == 1


def test_at_most_once_writes_an_intent_then_refuses_a_second_run():
    reg, calls = registry_with(effect=Effect.AT_MOST_ONCE)
    store = FakeStore()
    execute_call(reg, store, CTX, "t", {"n": 1})
    assert (CTX.run_id, keys.intent_key(CTX.turn, CTX.call)) in store.records
    with pytest.raises(OutcomeUnknownError, match="turn 2, call 1"):
        execute_call(reg, store, CTX, "t", {"n": 1})
    assert len(calls) == 1


@pytest.mark.parametrize("effect", [Effect.READ, Effect.KEYED])
def test_rerunnable_effects_run_again_and_write_no_intent(effect):
    reg, calls = registry_with(effect=effect)
    store = FakeStore()
    execute_call(reg, store, CTX, "t", {"n": 1})
    execute_call(reg, store, CTX, "t", {"n": 1})
    assert len(calls) == 2
    assert store.records == {}


def test_throttled_tool_call_becomes_a_retryable_error():
    def fn(args, ctx):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutItem")

    reg, _ = registry_with(fn=fn)
    with pytest.raises(ThrottledError):
        execute_call(reg, FakeStore(), CTX, "t", {"n": 1})


# -- probes: an intent without a result asks the tool's probe ------------------------------------


def _interrupted(reg, store):
    """Run the at-most-once call once (it writes its intent), as a crash before recording would leave it."""
    execute_call(reg, store, CTX, "t", {"n": 1})


def test_probe_yes_records_the_effect_as_done_without_running_again():
    seen = []

    def probe(args, ctx):
        seen.append((args.n, ctx.idempotency_key))
        return ProbeAnswer.happened_with({"n": 2, "from": "probe"})

    reg, calls = registry_with(effect=Effect.AT_MOST_ONCE, probe=probe)
    store = FakeStore()
    _interrupted(reg, store)
    assert execute_call(reg, store, CTX, "t", {"n": 1}) == success({"n": 2, "from": "probe"})
    assert len(calls) == 1 and seen == [(1, "r:2:1")]


def test_probe_no_runs_the_tool():
    reg, calls = registry_with(effect=Effect.AT_MOST_ONCE, probe=lambda args, ctx: ProbeAnswer.not_happened())
    store = FakeStore()
    _interrupted(reg, store)
    assert execute_call(reg, store, CTX, "t", {"n": 1}) == success({"n": 2})
    assert len(calls) == 2
    assert (CTX.run_id, keys.intent_key(CTX.turn, CTX.call)) in store.records  # a crash now is probed again


@pytest.mark.parametrize(
    ("probe", "reason"),
    [
        (lambda args, ctx: ProbeAnswer.unknown("the payment API is down"), "its probe cannot tell: the payment API is down"),
        (lambda args, ctx: (_ for _ in ()).throw(RuntimeError("boom")), "its probe failed: RuntimeError: boom"),
        (lambda args, ctx: True, "its probe returned bool, not a ProbeAnswer"),
        (None, "the tool declares no probe"),
    ],
    ids=["cannot-tell", "probe-raises", "wrong-type", "no-probe"],
)
def test_probe_that_cannot_answer_escalates(probe, reason):
    reg, calls = registry_with(effect=Effect.AT_MOST_ONCE, probe=probe)
    store = FakeStore()
    _interrupted(reg, store)
    with pytest.raises(OutcomeUnknownError, match="turn 2, call 1") as caught:
        execute_call(reg, store, CTX, "t", {"n": 1})
    assert reason in str(caught.value)
    assert len(calls) == 1


def test_probe_is_not_asked_on_a_first_run():
    asked = []
    reg, calls = registry_with(effect=Effect.AT_MOST_ONCE, probe=lambda args, ctx: asked.append(1) or ProbeAnswer.not_happened())
    execute_call(reg, FakeStore(), CTX, "t", {"n": 1})
    assert asked == [] and len(calls) == 1
