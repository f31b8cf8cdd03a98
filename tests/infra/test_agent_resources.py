"""Declared resources become per-agent grants: two agents synthesized together keep apart.

The sample triage agent and a test-only invoice agent (tests/fixtures/agents/invoice.py: a table,
a Grant on a queue, a secret by name) in one app: each agent's CallTool role (and CheckCondition
role, for an agent that declares conditions) holds exactly that agent's declared actions and
nothing on the other's resources; the functions
that run no agent code hold no agent's grants; the state machine reaches each agent's functions
through BindAgent; cdk-nag stays clean; a bad agent reference fails synth with one line.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import longstep_kit.app
from agents import triage_world
from longstep.resources import ENV_AGENT, READ_ITEM_ACTIONS, READ_WRITE_ITEM_ACTIONS, SCAN_ACTIONS
from longstep_kit.config import ConfigError
from tests.fixtures.agents import invoice

from .conftest import REPO_ROOT, resources_of_type

AGENTS = {"triage": "agents.triage:build", "invoice": "tests.fixtures.agents.invoice:build"}
PER_AGENT_HANDLERS = {
    "longstep_functions.call_tool.lambda_handler",
    "longstep_functions.call_tool_eval.lambda_handler",
    "longstep_functions.check_condition.lambda_handler",
}


def _context(agents: dict[str, str]) -> dict[str, Any]:
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    context["longstep"] = {**context["longstep"], "agents": agents}
    return context


@pytest.fixture(scope="module")
def two_agents_app(tmp_path_factory):
    return longstep_kit.app.build_app(REPO_ROOT, context=_context(AGENTS), outdir=str(tmp_path_factory.mktemp("cdk-agents")))


@pytest.fixture(scope="module")
def template(two_agents_app) -> dict[str, Any]:
    (stack,) = two_agents_app.synth().stacks
    return stack.template


def _tables(template: dict[str, Any], agent: str) -> dict[str, str]:
    """Declared name -> logical id of ``agent``'s tables."""
    prefix = f"Resources{agent}Table"
    return {lid[len(prefix) : -8]: lid for lid in resources_of_type(template, "AWS::DynamoDB::Table") if lid.startswith(prefix)}


def _function(template: dict[str, Any], agent: str, handler: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (lid, fn)
        for lid, fn in resources_of_type(template, "AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"] == handler and fn["Properties"]["Environment"]["Variables"].get(ENV_AGENT) == agent
    ]
    return found


def _statements(template: dict[str, Any], fn: dict[str, Any]) -> list[dict[str, Any]]:
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _actions_on(statements: list[dict[str, Any]], resource: Any) -> set[str]:
    """The actions the statements allow on ``resource`` (a rendered template value)."""
    return {action for s in statements if s["Effect"] == "Allow" and resource in _as_list(s["Resource"]) for action in _as_list(s["Action"])}


def _arn(lid: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [lid, "Arn"]}


def test_each_agent_gets_its_own_tables(template):
    assert set(_tables(template, "triage")) == {t.name for t in triage_world.RESOURCES}
    assert set(_tables(template, "invoice")) == {"invoices"}
    (table,) = [resources_of_type(template, "AWS::DynamoDB::Table")[_tables(template, "invoice")["invoices"]]]
    assert table["Properties"]["KeySchema"] == invoice.INVOICES.schema().key_schema()
    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_invoice_functions_hold_exactly_its_grants(template):
    # Its CallTool only: the invoice agent declares no conditions, so its CheckCondition holds
    # none of them (test_an_agent_without_conditions_checks_nothing).
    lid, fn = _function(template, "invoice", "longstep_functions.call_tool.lambda_handler")
    statements = _statements(template, fn)
    invoices = _tables(template, "invoice")["invoices"]
    assert _actions_on(statements, _arn(invoices)) == set(invoice.INVOICES.actions)
    assert _actions_on(statements, invoice.PAYMENTS_QUEUE) == {"sqs:SendMessage"}
    secret = [s for s in statements if any("secretsmanager" in a for a in _as_list(s["Action"]))]
    assert [s["Action"] for s in secret] == ["secretsmanager:GetSecretValue"], lid
    assert "prod/payments/api-key-??????" in json.dumps(secret[0]["Resource"])
    for table_lid in _tables(template, "triage").values():
        assert not _actions_on(statements, _arn(table_lid)), f"{lid} may use triage's {table_lid}"
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[invoice.INVOICES.variable] == {"Ref": invoices}
    assert variables[invoice.API_KEY.variable] == invoice.API_KEY.secret_id
    assert json.loads(variables["LONGSTEP_AGENTS"]) == {"invoice": AGENTS["invoice"]}
    assert not [v for v in variables if v in {t.variable for t in triage_world.RESOURCES}]


def test_an_agent_without_conditions_checks_nothing(template):
    """A CheckCondition that answers "unknown condition" reads no table: its role holds only its logs and X-Ray."""
    assert not invoice.build().conditions
    lid, fn = _function(template, "invoice", "longstep_functions.check_condition.lambda_handler")
    actions = {a for s in _statements(template, fn) for a in _as_list(s["Action"])}
    assert actions <= {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}, lid
    assert invoice.INVOICES.variable not in fn["Properties"]["Environment"]["Variables"]


# An eval run's CallTool holds only the reads of these (test_an_eval_runs_call_tool_holds_...).
@pytest.mark.parametrize("handler", sorted(PER_AGENT_HANDLERS - {"longstep_functions.call_tool_eval.lambda_handler"}))
def test_triage_functions_hold_nothing_of_invoice(template, handler):
    lid, fn = _function(template, "triage", handler)
    statements = _statements(template, fn)
    text = json.dumps(statements)
    assert _tables(template, "invoice")["invoices"] not in text
    assert "sqs:" not in text and "secretsmanager:" not in text and invoice.PAYMENTS_QUEUE not in text
    # Its own tables, each with the actions it declares (Scan on the documents, and on the outbox for send_email's probe).
    for table in triage_world.RESOURCES:
        assert _actions_on(statements, _arn(_tables(template, "triage")[table.name])) == set(table.actions), table.name
    assert "dynamodb:Scan" in triage_world.DOCUMENTS.actions and "dynamodb:Scan" not in READ_WRITE_ITEM_ACTIONS


def test_an_eval_runs_call_tool_holds_the_agents_reads_and_none_of_its_writes(template):
    lid, fn = _function(template, "triage", "longstep_functions.call_tool_eval.lambda_handler")
    statements = _statements(template, fn)
    for table in triage_world.RESOURCES:
        reads = {a for a in table.actions if a in READ_ITEM_ACTIONS + SCAN_ACTIONS}
        assert reads and _actions_on(statements, _arn(_tables(template, "triage")[table.name])) == reads, table.name
    text = json.dumps(statements)
    assert "Approvals" not in text and invoice.PAYMENTS_QUEUE not in text, lid
    memory = [s for s in statements if "Memory" in json.dumps(s["Resource"])]
    assert {a for s in memory for a in _as_list(s["Action"])} == {"dynamodb:Query"}, lid  # recall, never remember
    _, invoicing = _function(template, "invoice", "longstep_functions.call_tool_eval.lambda_handler")
    assert "sqs:" not in json.dumps(_statements(template, invoicing))  # a Grant may write: not given


def test_functions_that_run_no_agent_code_hold_no_agent_grants(template):
    agent_tables = [lid for agent in AGENTS for lid in _tables(template, agent).values()]
    for lid, fn in resources_of_type(template, "AWS::Lambda::Function").items():
        if fn["Properties"]["Handler"] in PER_AGENT_HANDLERS or fn["Properties"]["Handler"] == "longstep_functions.rotate_link_key.lambda_handler":
            continue  # the link key's rotation function holds the stack's secret, no agent's
        # The approval pages' link key (constructs/approval_pages.py) is the stack's, not an agent's.
        statements = [s for s in _statements(template, fn) if not json.dumps(s.get("Resource")).startswith('{"Ref": "LinkKeySecret')]
        text = json.dumps(statements)
        assert not [t for t in agent_tables if t in text], lid
        assert invoice.PAYMENTS_QUEUE not in text and "secretsmanager:" not in text, lid
        assert ENV_AGENT not in fn["Properties"]["Environment"]["Variables"], lid


def test_the_state_machine_binds_each_agents_functions(template):
    from longstep_kit.testing.asl import all_states, state_machine_definitions

    (definition,) = state_machine_definitions(template).values()
    states = all_states(definition)
    rules = [r if "StringEquals" in r else {**r["And"][1], "Next": r["Next"], "eval": True} for r in states["BindAgent"]["Choices"][1:]]
    assert sorted((rule["StringEquals"], rule.get("eval", False)) for rule in rules) == sorted((a, e) for a in AGENTS for e in (False, True))
    for rule in rules:
        agent = rule["StringEquals"]
        assigned = states[rule["Next"]]["Assign"]
        # An eval run (docs/evals.md) binds the agent's CallToolEval, whose role holds only its reads.
        call_tool, _ = _function(template, agent, f"longstep_functions.{'call_tool_eval' if rule.get('eval') else 'call_tool'}.lambda_handler")
        check, _ = _function(template, agent, "longstep_functions.check_condition.lambda_handler")
        # Each names the version this deploy published of the agent's function (pinning).
        for function, variable in ((call_tool, "call_tool_function"), (check, "check_condition_function")):
            version = assigned[variable].rpartition(":")[2]
            assert template["Resources"][version]["Type"] == "AWS::Lambda::Version", agent
            assert template["Resources"][version]["Properties"]["FunctionName"] == {"Ref": function}, agent


def test_nag_is_clean_with_two_agents(two_agents_app):
    from cdk_nag import AwsSolutionsChecks, ServerlessChecks

    for pack in (AwsSolutionsChecks(), ServerlessChecks()):
        report = pack.validate_scope(two_agents_app)
        findings = [f"{v.rule_name} at {[r.construct_path for r in v.violating_resources]}" for v in report.violations]
        assert findings == [], type(pack).__name__


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("tests.fixtures.agents.missing:build", "module 'tests.fixtures.agents.missing' not found"),
        ("tests.fixtures.agents.invoice:nothing", "has no callable 'nothing'"),
        ("tests.fixtures.agents.invoice:build_fails", "RuntimeError: cannot reach the ledger"),
        ("tests.fixtures.agents.invoice:build_duplicate_tables", "two Table declarations named 'invoices'"),
    ],
)
def test_a_bad_agent_fails_synth_with_one_line(tmp_path, reference, expected):
    with pytest.raises(ConfigError) as info:
        longstep_kit.app.build_app(REPO_ROOT, context=_context({"triage": AGENTS["triage"], "bad": reference}), outdir=str(tmp_path))
    message = str(info.value)
    assert message.startswith("longstep.agents.bad: "), message
    assert expected in message and "\n" not in message, message
