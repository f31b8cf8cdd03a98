"""docs/your-agent.md's agent (the invoice agent `longstep init` writes) synthesized beside the
sample: its tool functions hold exactly the actions it declares on its own two tables (Query on the
payments table, for the payment's probe, and no Scan there) and nothing on the sample's; the
sample's hold nothing of its tables."""

from __future__ import annotations

import pytest

import longstep_kit.app
from agents import triage_world
from longstep_kit.templates.project.functions import invoice

from .conftest import REPO_ROOT, resources_of_type
from .test_agent_resources import PER_AGENT_HANDLERS, _actions_on, _arn, _context, _function, _statements, _tables

AGENTS = {"triage": "agents.triage:build", "invoice": "examples.your_agent:build"}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    app = longstep_kit.app.build_app(REPO_ROOT, context=_context(AGENTS), outdir=str(tmp_path_factory.mktemp("cdk-your-agent")))
    (stack,) = app.synth().stacks
    return stack.template


def test_the_agent_gets_its_two_tables_with_their_keys(template):
    tables = _tables(template, "invoice")
    assert set(tables) == {"invoices", "payments"}
    payments = resources_of_type(template, "AWS::DynamoDB::Table")[tables["payments"]]
    assert payments["Properties"]["KeySchema"] == invoice.PAYMENTS.schema().key_schema()


def test_its_functions_hold_exactly_its_grants(template):
    # Its CallTool: the agent declares no conditions, so its CheckCondition is granted nothing.
    lid, fn = _function(template, "invoice", "longstep_functions.call_tool.lambda_handler")
    statements = _statements(template, fn)
    tables = _tables(template, "invoice")
    assert _actions_on(statements, _arn(tables["invoices"])) == set(invoice.INVOICES.actions)
    assert _actions_on(statements, _arn(tables["payments"])) == {"dynamodb:PutItem", "dynamodb:Query"}
    for table_lid in _tables(template, "triage").values():
        assert not _actions_on(statements, _arn(table_lid)), f"{lid} may use triage's {table_lid}"


@pytest.mark.parametrize("handler", sorted(PER_AGENT_HANDLERS))
def test_the_sample_holds_nothing_of_its_tables(template, handler):
    _, fn = _function(template, "triage", handler)
    statements = _statements(template, fn)
    for table_lid in _tables(template, "invoice").values():
        assert not _actions_on(statements, _arn(table_lid))
    assert {t.name for t in triage_world.RESOURCES} == set(_tables(template, "triage"))
