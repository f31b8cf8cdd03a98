"""Approval pages reachable without writing code: ``longstep approvals`` prints each pending request's
signed decision link, and ``longstep inbox-link`` mints an inbox link for named runs or an agent.
Each link is checked with the stack's own key: it grants what it says and nothing more."""

from __future__ import annotations

import contextlib
import io
import json
import urllib.parse

from longstep import clock, links
from longstep.humans.requests import pending_approvals
from longstep.humans.table import ApprovalTable
from longstep_kit.cli import main
from longstep_kit.testing import RunOptions, wait_until
from tests.local.conftest import Background


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--stack", "Longstep"])
    return code, out.getvalue()


def _capability(stack, url: str) -> links.Capability:
    token = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["link"][0] if "link=" in url else url.rsplit("/", 1)[-1]
    secret = stack.client("cloudformation").describe_stacks(StackName="Longstep")["Stacks"][0]["Outputs"]
    arn = next(o["OutputValue"] for o in secret if o["OutputKey"] == "LinkKeySecretArn")
    return links.keyring_from_secret(stack.client("secretsmanager"), arn).verify(token, clock.now())


def test_approvals_prints_each_requests_link_and_inbox_link_mints_one(stack, triage):
    table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    with stack.clock.held():  # a person is deciding
        background = Background(stack, triage, RunOptions(run_id="links-run", approve="external"))
        wait_until("a pending approval", lambda: pending_approvals(table, "links-run"))
        code, out = _cli("approvals", "--run", "links-run", "--output", "json")
        (request,) = json.loads(out)
        assert code == 0 and request["link"]
        granted = _capability(stack, request["link"])
        assert granted.scope == links.Scope(approval=request["approval_id"])
        code, text = _cli("approvals", "--run", "links-run")
        assert f"{request['approval_id']}: {request['link']}" in text
        code, inbox = _cli("inbox-link", "--run", "links-run", "--hours", "2")
        assert code == 0
        scope = _capability(stack, inbox.strip()).scope
        assert scope == links.Scope(runs=("links-run",)) and scope.covers(request) and not scope.covers({**request, "run_id": "another"})
        code, agent_inbox = _cli("inbox-link", "--agent", "triage", "--output", "json")
        assert _capability(stack, json.loads(agent_inbox)["link"]).scope == links.Scope(agent="triage")
        stack.client("stepfunctions").stop_execution(executionArn=background_execution(stack, "links-run"))
    background.thread.join(60)


def background_execution(stack, run_id: str) -> str:
    from longstep_kit.ops import runs

    return runs.latest_execution(stack.client("stepfunctions"), stack.state_machine_arn, run_id)["executionArn"]
