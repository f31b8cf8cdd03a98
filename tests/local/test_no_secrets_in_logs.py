"""Nothing secret in the logs: the triage scenario on the local stack, every line of output captured.

The handlers print only inside Lambda (``longstep.observability``), so the test sets the variable
the Lambda runtime sets and the local stack's functions write their JSON log lines and EMF
metrics as they would to CloudWatch. Every task token the run handed out (read back from the
approvals table and from the execution history) must be absent from stdout and stderr (capfd)
and from Python logging (caplog), while the run id is on the lines: proof that logs were captured.
"""

from __future__ import annotations

import json
import logging

from longstep_kit.local.runner import RunOptions, run_scenario
from longstep import observability as obs
from longstep import settings

RUN = "no-secrets-run"
# A task token that a hostile event also puts where the logs do look: the run id.
PLANTED = "planted-secret-task-token-0123456789"


def _tokens(stack) -> set[str]:
    """Every task token of the run: the approval requests keep theirs, the history has them all."""
    ddb = stack.client("dynamodb")
    items = ddb.scan(TableName=stack.outputs["ApprovalsTableName"])["Items"]
    tokens = {item["task_token"]["S"] for item in items if item["run_id"]["S"] == RUN}
    sfn = stack.client("stepfunctions")
    for execution in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]:
        if execution["name"] != RUN:
            continue
        for event in sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]:
            parameters = event.get("taskScheduledEventDetails", {}).get("parameters")
            if parameters and "token" in parameters:
                tokens.add(json.loads(parameters)["Payload"]["token"])
    return tokens


def _function_named(stack, handler: str) -> str:
    functions = stack.client("lambda").list_functions()["Functions"]
    (name,) = [f["FunctionName"] for f in functions if f["Handler"] == handler]
    return name


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_triage_run_logs_no_task_token(stack, triage, monkeypatch, caplog, capfd):
    monkeypatch.setenv(settings.ENV_LAMBDA_FUNCTION_NAME, "longstep-local")  # print as in Lambda
    caplog.set_level(logging.INFO)
    report = run_scenario(stack, triage, RunOptions(run_id=RUN))
    assert report["status"] == "SUCCEEDED"
    # A hostile approval request that puts its token where the logs do look: the run id.
    payload = {"token": PLANTED, "item": {"run_id": PLANTED, "turn": "not a turn"}}
    answer = stack.client("lambda").invoke(FunctionName=_function_named(stack, "longstep.handlers.request_approval.lambda_handler"), Payload=json.dumps(payload))
    assert answer.get("FunctionError")
    out, err = capfd.readouterr()
    logged = "\n".join(f"{r.name} {r.levelname} {r.getMessage()} {r.__dict__}" for r in caplog.records)

    # The logs were captured, and every step's line names its run and turn.
    lines = _json_lines(out)
    logs = [line for line in lines if "level" in line]
    assert RUN in out and len(logs) >= 20
    assert any(r.getMessage() == "task finished" for r in caplog.records)
    steps = [line for line in logs if line.get("run_id") == RUN and line["task"] in ("model_turn", "call_tool")]
    assert steps and all(isinstance(line["turn"], int) for line in steps)
    assert all(isinstance(line["call"], int) for line in steps if line["task"] == "call_tool")

    # Metrics went out as EMF, tool calls by effect class.
    emf = [line for line in lines if "_aws" in line]
    assert {m["Namespace"] for line in emf for m in line["_aws"]["CloudWatchMetrics"]} == {settings.METRICS_NAMESPACE}
    assert {"read", "keyed", "check_then_act", "at_most_once"} <= {line[obs.EFFECT] for line in emf if obs.TOOL_CALLS in line}

    # No task token anywhere: not the run's, not the planted one. The tokens stay server-side, in
    # the approval records that the approvers' decisions resume the run through.
    tokens = _tokens(stack)
    assert len(tokens) >= 2, "the triage run asks for two approvals"
    for token in tokens | {PLANTED}:
        for where, text in (("stdout", out), ("stderr", err), ("logging", logged)):
            assert token not in text, f"a task token in {where}"

    # The planted token was masked where it would have been logged.
    (failed,) = [line for line in logs if line["message"] == "task failed" and line["task"] == "request_approval"]
    assert failed["run_id"] == obs.REDACTED and failed["error"] == "InvalidInputError"

