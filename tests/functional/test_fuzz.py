"""Hostile input: every handler, fed arbitrary JSON events (300 per handler in the suite; `make
fuzz` feeds 5,000), fails only with a typed error and writes nothing when it fails.

Events are drawn two ways: any JSON value at all, and near-misses (the right keys with wrong,
missing or out-of-range values, around a real run) that get past the first checks. A handler may
succeed (some near-misses are valid events); when it raises, the error must be a ``LongstepError``
(what the state machine's Retry and Catch lists name) and the checkpoint table must be untouched.

One moto account per test function, not per example: the handlers' writes are counted in moto's
DynamoDB backend, so an example costs a handler call, not a table scan.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from longstep import keys
from longstep.errors import LongstepError

from tests.functional.conftest import FakeContext, drive_to

RUN = "fuzz-run-1"
UNKNOWN_RUN = "no-such-run"
TOOLS = ["search_docs", "read_document", "file_ticket", "update_ticket", "send_email"]
# The suite's share of the fuzzing stays a few seconds per handler; `make fuzz` goes deeper.
EXAMPLES = settings(
    max_examples=int(os.environ.get("LONGSTEP_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3), max_leaves=6
)
run_ids = st.sampled_from([RUN, UNKNOWN_RUN, "", "x" * 81, "has spaces", "a" * 3000]) | json_values
turns = st.integers(min_value=-3, max_value=25) | st.sampled_from([10**5, 10**40]) | json_values
calls = st.integers(min_value=-2, max_value=4) | st.sampled_from([999, 10**40]) | json_values
tools = st.sampled_from(TOOLS + ["no_such_tool", ""]) | json_values
decisions = (
    st.fixed_dictionaries(
        {"decision": st.sampled_from(["approve", "reject", "edit"]) | json_values},
        optional={"input": json_values, "reason": json_values},
    )
    | json_values
)
resolutions = (
    st.fixed_dictionaries(
        {"action": st.sampled_from(["retry", "skip", "abort"]) | json_values},
        optional={"result": json_values, "happened": json_values},
    )
    | json_values
)
cursors = st.fixed_dictionaries({}, optional={"run_id": run_ids, "next_turn": turns, "resolution": resolutions, "stop": json_values})
tool_items = st.fixed_dictionaries(
    {},
    optional={
        "run_id": run_ids,
        "turn": turns,
        "call": calls,
        "tool": tools,
        "approval": json_values,
        "decision": decisions,
        "resolution": resolutions,
    },
)
start_inputs = st.fixed_dictionaries(
    {},
    optional={
        "run_id": st.text(alphabet="abcXYZ019_-", min_size=1, max_size=80) | run_ids,
        "goal": st.text(max_size=30) | json_values,
        "agent": st.sampled_from(["triage", "nobody"]) | json_values,
        "max_turns": turns,
        "model": st.fixed_dictionaries(
            {},
            optional={
                "provider": st.sampled_from(["bedrock", "scripted"]) | json_values,
                "script_uri": st.sampled_from(["s3://b/k", "http://x"]) | json_values,
                "model_id": json_values,
            },
        )
        | json_values,
        "colour": json_values,
    },
)
tokens = st.text(min_size=1, max_size=60) | json_values
approval_events = st.fixed_dictionaries({}, optional={"item": tool_items | json_values, "token": tokens})
escalation_events = st.fixed_dictionaries(
    {},
    optional={
        "item": st.one_of(
            json_values,
            cursors.map(lambda c: {**c, "error": {"Error": "ThrottledError", "Cause": "{}"}}),
            tool_items.map(lambda c: {**c, "error": {"Error": "ToolFailedError", "Cause": '{"errorMessage": "x"}'}}),
        ),
        "token": tokens,
    },
)


@pytest.fixture
def checkpoint_writes(aws, monkeypatch):
    """A list that grows by one for every change moto's DynamoDB makes to the checkpoint table's run
    state (its event stream aside: a failed step's ``step.failed`` event is what followers are told,
    ``longstep.events``; a stream is never created for a run that does not exist, checked below)."""
    from moto.dynamodb.models import DynamoDBBackend

    writes: list[str] = []
    events_of: set[str] = set()
    created: set[str] = set()
    for name in ("put_item", "update_item", "delete_item"):
        original = getattr(DynamoDBBackend, name)

        def counting(backend, table_name, *args, _original=original, _name=name, **kwargs):
            result = _original(backend, table_name, *args, **kwargs)
            item = kwargs.get("item_attrs") or (args[0] if args and _name == "put_item" else {})
            if table_name == "checkpoints" and str((item.get("sk") or {}).get("S", "")).startswith(keys.EVENT_PREFIX):
                events_of.add(str((item.get("pk") or {}).get("S", "")))
                return result
            if table_name == "checkpoints" and (_name != "delete_item" or result is not None):
                key = kwargs.get("key") or (args[0] if args and _name != "put_item" else item)
                writes.append((_name, str((key.get("sk") or {}).get("S", ""))))
                if _name == "put_item" and str((key.get("sk") or {}).get("S", "")) == keys.RUN_RECORD:
                    created.add(str((key.get("pk") or {}).get("S", "")))  # a valid start input makes a run
            return result

        monkeypatch.setattr(DynamoDBBackend, name, counting)
    yield writes
    assert events_of <= {RUN} | created, f"events were appended for runs that do not exist: {sorted(events_of - {RUN} - created)}"


@pytest.fixture
def run(aws, checkpoint_writes):
    """A real run three turns in, so that near-miss events reach the checks past the parsing."""
    drive_to(3, run_id=RUN)
    checkpoint_writes.clear()
    return RUN


def _net(writes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The writes that stay: a step's claim put and then deleted (the step failed and released
    it: ``longstep.claims``) leaves nothing."""
    left: list[tuple[str, str]] = []
    for name, sk in writes:
        if name == "delete_item" and ("put_item", sk) in left:
            left.remove(("put_item", sk))
        else:
            left.append((name, sk))
    return left


def _check(module: str, event: Any, writes: list[tuple[str, str]], must_fail: Callable[[Any], bool] = lambda e: False) -> None:
    import importlib

    handler = importlib.import_module(f"longstep_functions.{module}").lambda_handler
    before = len(writes)
    try:
        handler(copy.deepcopy(event), FakeContext())
    except LongstepError:
        left = _net(writes[before:])
        assert not left, f"{module} failed after writing to the checkpoint table: {left}"
        return
    assert not must_fail(event), f"{module} accepted {event!r}"


def _names_unknown_run(event: Any, key: str | None = None) -> bool:
    source = event.get(key) if key and isinstance(event, dict) else event
    return isinstance(source, dict) and source.get("run_id") == UNKNOWN_RUN


@EXAMPLES
@given(event=start_inputs | json_values)
def test_init_run(run, checkpoint_writes, event):
    _check("init_run", event, checkpoint_writes)


# Found by this test: an empty or oversized run id or turn reached DynamoDB as a key, which
# rejected it with a botocore ValidationException instead of an InvalidInputError.
@EXAMPLES
@given(event=cursors | json_values)
@example(event={"run_id": "", "next_turn": 0})
@example(event={"run_id": "a" * 3000, "next_turn": 0})
@example(event={"run_id": RUN, "next_turn": 10**40})
def test_model_turn(run, checkpoint_writes, event):
    _check("model_turn", event, checkpoint_writes, _names_unknown_run)


@EXAMPLES
@given(event=tool_items | json_values)
@example(event={"run_id": RUN, "turn": 0, "call": 10**40, "tool": "search_docs"})
def test_call_tool(run, checkpoint_writes, event):
    _check("call_tool", event, checkpoint_writes, _names_unknown_run)


@EXAMPLES
@given(event=approval_events | json_values)
def test_request_approval(run, checkpoint_writes, event):
    _check("request_approval", event, checkpoint_writes, lambda e: _names_unknown_run(e, "item"))


# Found by this test: Finish wrote a final record (and reported SUCCEEDED) for a run that does not exist.
@EXAMPLES
@given(event=cursors | json_values)
@example(event={"run_id": UNKNOWN_RUN, "next_turn": 0})
@example(event={"run_id": "", "next_turn": 0})
def test_finish(run, checkpoint_writes, event):
    _check("finish", event, checkpoint_writes, _names_unknown_run)


@EXAMPLES
@given(event=escalation_events | json_values)
def test_escalate(run, checkpoint_writes, event):
    _check("escalate", event, checkpoint_writes)
