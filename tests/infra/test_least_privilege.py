"""Each function's role allows every AWS call its handler makes, on the resource it makes it on.

The grants are narrow (infra/constructs/loop_access.py ``ACCESS``), and moto does not enforce
IAM, so a handler that starts using a new action would pass every local test and fail in AWS.
Here the handlers run a whole triage run on moto (its approvals decided through the approval API,
the second one left to time out, signals sent through the API and the EventBridge handler), each
botocore call is recorded against the handler that made it, and each call is looked up in that
function's statements in the default template (the session's shared synth), with the matcher the
local stack enforces IAM with (infra/local/iam.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.client import BaseClient

from longstep import settings as env
from longstep_kit.local import iam

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
            # A batch names its tables in RequestItems (this runtime's batches read one table each).
            batch = list(params.get("RequestItems") or ())
            resource = (
                params.get("TableName") or (batch[0] if batch else None) or params.get("TopicArn") or f"{params.get('Bucket')}/{params.get('Key')}"
            )
            if params.get("IndexName"):
                resource += f"/index/{params['IndexName']}"
            calls.append((current["handler"], f"{service}:{operation}", resource))
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: _SentTasks(calls, current))

    def run(name: str, event: dict[str, Any], attr: str = "lambda_handler") -> dict[str, Any]:
        current["handler"] = name if attr == "lambda_handler" else f"{name}.{attr}"
        try:
            return getattr(importlib.import_module(f"longstep_functions.{name}"), attr)(json.loads(json.dumps(event)), FakeContext())
        finally:
            current["handler"] = None

    def api(sample: str, approval_id: str = "") -> dict[str, Any]:
        event = load_event(f"approval_api_{sample}")
        event["path"] = event["path"].replace("APPROVAL-ID", approval_id)
        return run("approval_api", event)

    start = {**load_event("init_run"), "run_id": RUN}
    cursor = run("init_run", start)
    approvals_seen = 0
    while True:
        out = run("model_turn", cursor)
        if out["route"] == "tool":  # CallOneTool: the call item is ModelTurn's output
            run("call_tool", out)
            cursor = out
            continue
        if out["route"] != "tools":
            break
        for call in out["calls"]:
            item = dict(call)
            if item["approval"]:
                requested = run("request_approval", {"item": item, "token": TOKEN})
                assert requested["status"] == "pending"
                approvals_seen += 1
                if approvals_seen == 1:  # decided through the API; a retried request then takes the decision
                    assert api("list")["statusCode"] == 200 and api("get", requested["approval_id"])["statusCode"] == 200
                    assert api("decide", requested["approval_id"])["statusCode"] == 200
                    assert run("request_approval", {"item": item, "token": TOKEN + "-retry"})["status"] == "decided"
                    item["decision"] = {"decision": "approve"}
                else:  # nobody decides: the task times out and CallTool marks the request expired
                    item["decision"] = {"decision": "timeout"}
            run("call_tool", item)
        cursor = out
    assert approvals_seen == 2
    # To this run (a signal to a run that does not exist is refused: issue 24).
    signal = load_event("approval_api_signal")
    signal["path"] = signal["path"].replace("func-run-1", RUN)
    signal["pathParameters"]["run_id"] = RUN
    assert run("approval_api", signal)["statusCode"] == 200
    sent = load_event("signal_event")
    sent["detail"]["run_id"] = RUN
    run("approval_api", sent, attr="signal_handler")
    run("finish", cursor)
    failed = {"run_id": RUN, "next_turn": 1, "error": {"Error": "ThrottledError", "Cause": "{}"}}
    run("escalate", {"item": failed, "token": TOKEN + "-escalation"})
    return calls


def _function(template: dict[str, Any], handler: str) -> dict[str, Any]:
    full = f"longstep_functions.{handler}" if "." in handler else f"longstep_functions.{handler}.lambda_handler"
    (fn,) = [f for f in resources_of_type(template, "AWS::Lambda::Function").values() if f["Properties"]["Handler"] == full]
    return fn


# Template references rendered as patterns (``arn-of:X``, ``ref:X``): the functional run's resources
# are named through the function's environment, not deployed by CloudFormation.
def _as_pattern(template: dict[str, Any]) -> iam.Resolver:
    return iam.template_resolver(
        ref=lambda logical: f"ref:{logical}",
        get_att=lambda logical, attribute: f"arn-of:{logical}",
        pseudo={"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::URLSuffix": "amazonaws.com"},
        mappings=template.get("Mappings", {}),
    )


def _statements(template: dict[str, Any], fn: dict[str, Any]) -> list[dict[str, Any]]:
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    resolve = _as_pattern(template)
    return [iam.resolve_statement(s, resolve) for s in iam.role_statements(template, role)]


def _expected_resource(template: dict[str, Any], fn: dict[str, Any], action: str, resource: str) -> str:
    """The recorded resource as the template names it, through the function's environment."""
    variables = fn["Properties"]["Environment"]["Variables"]
    by_name = {name: var for var, (name, _) in TABLES.items()}
    by_name[BUCKET] = env.ENV_ARTIFACT_BUCKET
    if action.startswith("states:"):
        (machine,) = resources_of_type(template, "AWS::StepFunctions::StateMachine")
        return f"ref:{machine}"
    if action.startswith("sns:"):
        assert env.ENV_APPROVAL_TOPIC_ARN in variables, f"the function is not told about the topic yet calls {action}"
        return f"ref:{variables[env.ENV_APPROVAL_TOPIC_ARN]['Ref']}"
    name, _, rest = resource.partition("/")  # an object key, or an index of the table
    var = by_name[name]
    assert var in variables, f"the function is not told about {name} ({var}) yet calls {action} on it"
    return f"arn-of:{variables[var]['Ref']}" + (f"/{rest}" if rest else "")


def _allowed(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    return iam.allowed(statements, action, resource)


def test_the_run_exercises_every_handler_and_the_interesting_calls(recorded):
    pairs = {(handler, action) for handler, action, _ in recorded}
    assert {h for h, _ in pairs} == {
        "init_run",
        "model_turn",
        "call_tool",
        "request_approval",
        "escalate",
        "finish",
        "approval_api",
        "approval_api.signal_handler",
    }
    for expected in [
        ("model_turn", "s3:GetObject"),  # the model script
        ("model_turn", "dynamodb:UpdateItem"),  # the step lock, released with the result
        ("call_tool", "s3:PutObject"),  # the 330 KB incident report, offloaded
        ("call_tool", "dynamodb:Scan"),  # search_docs on the world
        ("call_tool", "dynamodb:UpdateItem"),  # the timed-out approval marked expired
        ("request_approval", "states:SendTaskSuccess"),  # the retried request, already decided
        ("request_approval", "sns:Publish"),  # approvers told of each request
        ("approval_api", "dynamodb:Query"),  # the pending list, on the index
        ("approval_api", "states:SendTaskSuccess"),  # the decision resumes the run
        ("approval_api.signal_handler", "dynamodb:UpdateItem"),  # the signal, kept for the wait
        ("approval_api.signal_handler", "dynamodb:PutItem"),  # its entry in the event's queue (issue 24)
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
