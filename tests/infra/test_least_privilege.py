"""Each function's role allows every AWS call its handler makes, on the resource it makes it on.

The grants are narrow (infra/constructs/durable_agent.py ``ACCESS``), and moto does not enforce
IAM, so a handler that starts using a new action would pass every local test and fail in AWS.
Here the handlers run a whole triage run on moto, each botocore call is recorded against the
handler that made it, and each call is looked up in that function's statements in the default
template (the session's shared synth).
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pytest
from botocore.client import BaseClient

from longstep import settings as env
from longstep.approvals import Decision, decide
from longstep.store import CheckpointStore

from tests.functional.conftest import TABLES, BUCKET, FakeContext, aws, load_event  # noqa: F401 - aws is a fixture

from .conftest import resources_of_type

RUN = "least-privilege-1"
TOKEN = "least-privilege-task-token-1"


class _SentTasks:
    """Stands in for Step Functions (moto knows no task token of ours); records like botocore."""

    def __init__(self, calls: list[tuple[str, str, str]], current: dict[str, Any]) -> None:
        self.calls, self.current = calls, current

    def send_task_success(self, taskToken: str, output: str) -> None:
        self.calls.append((self.current["handler"], "states:SendTaskSuccess", "state-machine"))


@pytest.fixture
def recorded(aws, monkeypatch):  # noqa: F811 - the functional fixture
    """Runs the triage scenario through every handler; returns [(handler, action, resource)]."""
    import importlib

    calls: list[tuple[str, str, str]] = []
    current: dict[str, Any] = {"handler": None}
    original = BaseClient._make_api_call

    def recording(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if current["handler"]:
            service = client.meta.service_model.metadata.get("signingName") or client.meta.service_model.endpoint_prefix
            resource = params.get("TableName") or f"{params.get('Bucket')}/{params.get('Key')}"
            calls.append((current["handler"], f"{service}:{operation}", resource))
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: _SentTasks(calls, current))

    def run(name: str, event: dict[str, Any]) -> dict[str, Any]:
        current["handler"] = name
        try:
            return importlib.import_module(name).lambda_handler(json.loads(json.dumps(event)), FakeContext())
        finally:
            current["handler"] = None

    start = {**load_event("init_run"), "run_id": RUN}
    cursor = run("init_run", start)
    store = CheckpointStore("checkpoints", aws["ddb"])
    while True:
        out = run("model_turn", cursor)
        if out["route"] != "tools":
            break
        for call in out["calls"]:
            item = dict(call)
            if item["approval"]:
                assert run("request_approval", {"item": item, "token": TOKEN})["status"] == "pending"
                decide(store, _SentTasks([], current), RUN, item["turn"], item["call"], Decision(decision="approve"))
                # A retried request after the decision hands it to the new token.
                assert run("request_approval", {"item": item, "token": TOKEN + "-retry"})["status"] == "decided"
                item["decision"] = {"decision": "approve"}
            run("call_tool", item)
        cursor = out
    run("finish", cursor)
    failed = {"run_id": RUN, "next_turn": 1, "error": {"Error": "ThrottledError", "Cause": "{}"}}
    run("escalate", {"item": failed, "token": TOKEN + "-escalation"})
    return calls


def _function(template: dict[str, Any], handler: str) -> dict[str, Any]:
    (fn,) = [f for f in resources_of_type(template, "AWS::Lambda::Function").values() if f["Properties"]["Handler"] == f"{handler}.lambda_handler"]
    return fn


def _statements(template: dict[str, Any], fn: dict[str, Any]) -> list[dict[str, Any]]:
    role = {"Ref": fn["Properties"]["Role"]["Fn::GetAtt"][0]}
    return [
        s
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if role in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _render(resource: Any) -> str:
    """A template resource as a pattern: ``Fn::GetAtt [X, Arn]`` -> ``arn-of:X``, joins concatenated."""
    if isinstance(resource, str):
        return resource
    if "Fn::GetAtt" in resource:
        return f"arn-of:{resource['Fn::GetAtt'][0]}"
    if "Ref" in resource:
        return f"ref:{resource['Ref']}"
    if "Fn::Join" in resource:
        separator, parts = resource["Fn::Join"]
        return separator.join(_render(p) for p in parts)
    raise AssertionError(f"unexpected resource {resource!r}")


def _expected_resource(template: dict[str, Any], fn: dict[str, Any], action: str, resource: str) -> str:
    """The recorded resource as the template names it, through the function's environment."""
    variables = fn["Properties"]["Environment"]["Variables"]
    by_name = {name: var for var, (name, _) in TABLES.items()}
    by_name[BUCKET] = env.ENV_ARTIFACT_BUCKET
    if action.startswith("states:"):
        (machine,) = resources_of_type(template, "AWS::StepFunctions::StateMachine")
        return f"ref:{machine}"
    name, _, key = resource.partition("/")
    var = by_name[name]
    assert var in variables, f"the function is not told about {name} ({var}) yet calls {action} on it"
    return f"arn-of:{variables[var]['Ref']}" + (f"/{key}" if action.startswith("s3:") else "")


def _allowed(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    return any(
        s["Effect"] == "Allow"
        and any(fnmatch.fnmatchcase(action, a) for a in _as_list(s["Action"]))
        and any(fnmatch.fnmatchcase(resource, _render(r)) for r in _as_list(s["Resource"]))
        for s in statements
    )


def test_the_run_exercises_every_handler_and_the_interesting_calls(recorded):
    pairs = {(handler, action) for handler, action, _ in recorded}
    assert {h for h, _ in pairs} == {"init_run", "model_turn", "call_tool", "request_approval", "escalate", "finish"}
    for expected in [
        ("model_turn", "s3:GetObject"),  # the model script
        ("model_turn", "dynamodb:UpdateItem"),  # the step lock, released with the result
        ("call_tool", "s3:PutObject"),  # the 330 KB incident report, offloaded
        ("call_tool", "dynamodb:Scan"),  # search_docs on the world
        ("request_approval", "states:SendTaskSuccess"),  # the retried request, already decided
    ]:
        assert expected in pairs, expected


def test_every_call_is_allowed_by_the_functions_role(template, recorded):
    denied = []
    for handler, action, resource in sorted(set(recorded)):
        fn = _function(template, handler)
        expected = _expected_resource(template, fn, action, resource)
        if not _allowed(_statements(template, fn), action, expected):
            denied.append(f"{handler}: {action} on {expected}")
    assert denied == []


def test_the_check_can_fail(template):
    fn = _function(template, "init_run")
    statements = _statements(template, fn)
    assert not _allowed(statements, "s3:PutObject", _expected_resource(template, fn, "s3:PutObject", f"{BUCKET}/x"))
    assert not _allowed(statements, "dynamodb:DeleteItem", _expected_resource(template, fn, "dynamodb:DeleteItem", "checkpoints"))

