"""Nothing secret in the logs: the triage scenario on the local stack, every line of output captured.

The handlers print only inside Lambda (``longstep.observability``), so the test sets the variable
the Lambda runtime sets and the local stack's functions write their JSON log lines and EMF
metrics as they would to CloudWatch. Every task token the run handed out (read back from the
approvals table and from the execution history) must be absent from stdout and stderr (capfd)
and from Python logging (caplog), while the run id is on the lines: proof that logs were captured.
So must the approval pages' secrets: the HMAC key that signs links, every link (capability) the
notifications carried, and the CSRF token of a page, while pages are opened and posted to.
"""

from __future__ import annotations

import json
import logging

from longstep_kit.local.runner import RunOptions, run_scenario
from longstep.observability import metrics
from longstep.observability.logs import REDACTED
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


def _subscribe(stack) -> str:
    sqs = stack.client("sqs")
    queue_url = sqs.create_queue(QueueName="notifications")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stack.client("sns").subscribe(TopicArn=stack.outputs["ApprovalTopicArn"], Protocol="sqs", Endpoint=arn)
    return queue_url


def _page_secrets(stack, queue_url: str) -> tuple[set[str], list[str]]:
    """The link key (current version) and the links the run's notifications carried."""
    (secret,) = stack.secrets.values()
    key = stack.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"]
    urls = []
    for message in stack.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]:
        view = json.loads(json.loads(message["Body"])["Message"])
        urls.append(view["decision_url"])
    return {key}, urls


def _open_pages(stack, urls: list[str]) -> set[str]:
    """Open each link's page and post a decision to it (the runs are decided: 410); the CSRF tokens seen."""
    import re
    from urllib.parse import urlencode

    from longstep_kit.local.pages_server import PageServer, proxy_event

    pages = PageServer(stack)
    pages._function = pages._function_named("longstep_functions.approval_api.lambda_handler")
    seen = set()
    for url in urls:
        path = "/v1/" + url.split("/v1/", 1)[1]
        page = pages.invoke(proxy_event("GET", path, {"User-Agent": "test"}, None))
        assert page["statusCode"] == 410, page["statusCode"]  # the run decided it (auto)
        seen.update(re.findall(r'name="csrf" value="([^"]+)"', page["body"]))
        form = urlencode({"csrf": "c" * 43, "nonce": "n" * 22, "name": "Eve", "action": "approve"})
        assert pages.invoke(proxy_event("POST", path, {"Content-Type": "application/x-www-form-urlencoded"}, form))["statusCode"] == 403
    # A pending request's page carries a CSRF token.
    from longstep.humans import requests as approvals
    from longstep.humans.table import ApprovalTable
    from longstep.store import CheckpointStore

    table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    pending = approvals.request(
        table, store, None, run_id=RUN, turn=99, call=0, tool="send_email", tool_input={"to": "a@b.c"}, agent="triage", token=PLANTED + "-pending"
    )["approval_id"]
    link = pages.decision_link(pending).split("/v1/", 1)[1]
    page = pages.invoke(proxy_event("GET", "/v1/" + link, {"User-Agent": "test"}, None))
    assert page["statusCode"] == 200
    seen.update(re.findall(r'name="csrf" value="([^"]+)"', page["body"]))
    assert seen
    return seen


def test_a_triage_run_logs_no_task_token(stack, triage, monkeypatch, caplog, capfd):
    monkeypatch.setenv(settings.ENV_LAMBDA_FUNCTION_NAME, "longstep-local")  # print as in Lambda
    caplog.set_level(logging.INFO)
    queue_url = _subscribe(stack)
    report = run_scenario(stack, triage, RunOptions(run_id=RUN))
    assert report["status"] == "SUCCEEDED"
    keys, urls = _page_secrets(stack, queue_url)
    assert len(urls) >= 2, "each approval's notification carries its link"
    csrf_tokens = _open_pages(stack, urls)
    # A hostile approval request that puts its token where the logs do look: the run id.
    payload = {"token": PLANTED, "item": {"run_id": PLANTED, "turn": "not a turn"}}
    answer = stack.client("lambda").invoke(
        FunctionName=_function_named(stack, "longstep_functions.request_approval.lambda_handler"), Payload=json.dumps(payload)
    )
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
    assert {"read", "keyed", "check_then_act", "at_most_once"} <= {line[metrics.EFFECT] for line in emf if metrics.TOOL_CALLS in line}

    # No task token anywhere: not the run's, not the planted one. The tokens stay server-side, in
    # the approval records that the approvers' decisions resume the run through.
    tokens = _tokens(stack)
    assert len(tokens) >= 2, "the triage run asks for two approvals"
    for token in tokens | {PLANTED}:
        for where, text in (("stdout", out), ("stderr", err), ("logging", logged)):
            assert token not in text, f"a task token in {where}"

    # No link key, no link, no part of a link's signature anywhere.
    capabilities = {url.rsplit("/", 1)[1] for url in urls}
    for secret in keys | capabilities | {c.rsplit(".", 1)[1] for c in capabilities} | csrf_tokens:
        for where, text in (("stdout", out), ("stderr", err), ("logging", logged)):
            assert secret not in text, f"an approval page secret in {where}"
    assert any(line.get("task") == "approval_api" for line in logs), "the page requests were logged"

    # The planted token was masked where it would have been logged.
    (failed,) = [line for line in logs if line["message"] == "task failed" and line["task"] == "request_approval"]
    assert failed["run_id"] == REDACTED and failed["error"] == "InvalidInputError"
