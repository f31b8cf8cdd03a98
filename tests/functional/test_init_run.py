"""Init: validates the start input, creates or attaches to the run, finds where to resume."""

from __future__ import annotations

import json

import boto3
import pytest

from longstep.errors import InvalidInputError, RunConflictError, UnknownAgentError

from tests.functional.conftest import drive_to, handler, load_event, scan


def test_creates_the_run_and_starts_at_turn_zero(aws):
    out = handler("init_run")(load_event("init_run"))
    assert out == {"run_id": "func-run-1", "next_turn": 0, "resumed": False, "resolution": None, "generation": 0, "generation_start": 0}
    items = scan(aws["ddb"], "checkpoints")
    # The run, the start of its event stream, and its runs-index entries (longstep.runs_index).
    assert [i["sk"]["S"] for i in items] == ["event#000000000000", "index", "index#agent", "run"]
    (started,) = json.loads(items[0]["events"]["S"])
    assert (started["offset"], started["type"], started["goal"]) == (0, "run.started", load_event("init_run")["goal"])
    assert items[1]["agent"]["S"] == "triage"


def test_a_second_start_resumes_after_the_completed_turns(aws):
    drive_to(3)
    out = handler("init_run")(load_event("init_run"))
    assert out["resumed"] is True
    assert out["next_turn"] == 3


def test_same_run_id_with_another_goal_is_a_conflict(aws):
    handler("init_run")(load_event("init_run"))
    event = load_event("init_run")
    event["goal"] = "something else"
    with pytest.raises(RunConflictError, match="goal"):
        handler("init_run")(event)


def test_an_eval_start_never_attaches_to_a_run_that_is_not_that_eval(aws):
    # Attached, the eval would go on as the recorded run, whose calls act (longstep.evals).
    handler("init_run")(load_event("init_run"))
    spec = {"of": "func-run-0", "record_uri": "artifact://sha256/" + "0" * 64}
    with pytest.raises(RunConflictError, match="not this eval run"):
        handler("init_run")({**load_event("init_run"), "eval": spec})
    fresh = handler("init_run")({**load_event("init_run"), "run_id": "func-eval-1", "eval": spec})
    again = handler("init_run")({**load_event("init_run"), "run_id": "func-eval-1", "eval": spec})
    assert (fresh["resumed"], again["resumed"]) == (False, True)  # the eval run itself resumes


def test_an_eval_runs_next_execution_is_an_eval_start_too(aws):
    # BindAgent reads the input: without eval, the next execution would bind the CallTool that writes.
    sfn = boto3.client("stepfunctions")
    definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    arn = sfn.create_state_machine(name="loop", definition=definition, roleArn="arn:aws:iam::123456789012:role/loop")["stateMachineArn"]
    spec = {"of": "func-run-0", "at_turn": 0, "record_uri": "artifact://sha256/" + "0" * 64, "approvals": "withhold"}
    handler("init_run")({**load_event("init_run"), "run_id": "func-eval-2", "eval": spec})
    out = handler("continue_as_new")({"state_machine_arn": arn, "execution_name": "func-eval-2", "cursor": {"run_id": "func-eval-2", "next_turn": 3}})
    started = json.loads(sfn.describe_execution(executionArn=out["continued_as"])["input"])
    assert (started["eval"], started["generation"]) == (spec, 1)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e.pop("goal"), "goal"),
        (lambda e: e.update(run_id="has spaces"), "run_id"),
        (lambda e: e.update(max_turns=0), "max_turns"),
        (lambda e: e.update(model={"provider": "scripted"}), "model"),
        (lambda e: e.update(colour="blue"), "colour"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(aws, mutate, field):
    event = load_event("init_run")
    mutate(event)
    with pytest.raises(InvalidInputError, match=field):
        handler("init_run")(event)
    assert scan(aws["ddb"], "checkpoints") == []


def test_unknown_agent_names_the_agent_field(aws):
    event = load_event("init_run")
    event["agent"] = "nobody"
    with pytest.raises(UnknownAgentError, match="agent: unknown agent 'nobody'"):
        handler("init_run")(event)
    assert scan(aws["ddb"], "checkpoints") == []


def test_non_object_input_is_rejected(aws):
    with pytest.raises(InvalidInputError, match="must be a JSON object"):
        handler("init_run")(["not", "an", "object"])
