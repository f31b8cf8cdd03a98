"""docs/your-agent.md: its code blocks are real code (verbatim excerpts of the project template's
agent and scenario, the one copy ``longstep init`` writes and ``examples/your_agent/`` re-exports),
and the agent's tools, probe and ledgers work on moto.

(Its shell blocks are commands, run by tests/local/test_init_project.py and test_your_agent.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

import examples.your_agent
from longstep import clients
from longstep.environment import use_environment
from longstep.inmemory import InMemoryStore
from longstep.tools.executor import execute_call
from longstep.tools.registry import ProbeAnswer, ToolContext
from longstep_kit.templates.project.functions import invoice

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "your-agent.md"
TEMPLATE = ROOT / "infra" / "templates" / "project"
SOURCES = {"python": TEMPLATE / "functions" / "invoice.py", "json": TEMPLATE / "events" / "scenarios" / "invoice.json"}
BLOCK = re.compile(r"^```(python|json)\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in BLOCK.findall(DOC.read_text())]


def test_the_doc_shows_code_blocks():
    langs = [lang for lang, _ in _blocks()]
    assert langs.count("python") >= 6 and langs.count("json") >= 2


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_each_code_block_is_an_excerpt_of_the_example(index):
    lang, body = _blocks()[index]
    source = SOURCES[lang].read_text()
    assert body in source, f"block {index} ({lang}) is not in {SOURCES[lang].relative_to(ROOT)}:\n{body}"


def test_the_example_is_the_template_itself_not_a_copy():
    assert examples.your_agent.build is invoice.build and examples.your_agent.registry is invoice.registry
    assert sorted(p.name for p in (ROOT / "examples" / "your_agent").iterdir() if p.suffix in (".py", ".json")) == ["__init__.py"]


# -- the agent's tools on moto -------------------------------------------------------------------


@pytest.fixture
def tables():
    """The agent's two tables on moto, bound as its CallTool function's environment binds them."""
    with mock_aws():
        clients.reset()
        ddb = boto3.client("dynamodb")
        for table in (invoice.INVOICES, invoice.PAYMENTS):
            ddb.create_table(TableName=f"my-{table.name}", **table.schema().create_table_arguments())
        with use_environment({t.variable: f"my-{t.name}" for t in (invoice.INVOICES, invoice.PAYMENTS)}):
            yield ddb
        clients.reset()


def _ctx(turn: int, call: int = 0) -> ToolContext:
    return ToolContext(run_id="r1", turn=turn, call=call, idempotency_key=f"r1:{turn}:{call}")


def _keys(ledger) -> list[str]:
    return [entry.idempotency_key for entry in ledger("r1")]


def test_a_repeated_keyed_call_records_one_invoice(tables):
    args = invoice.RecordInvoiceArgs(vendor="ACME", amount_cents=125_000)
    first = invoice.record_invoice(args, _ctx(0))
    again = invoice.record_invoice(args, _ctx(0))  # a crash made the same call run again
    assert first == again == {"invoice_id": "INV-r1-0-0", "vendor": "ACME", "amount_cents": 125_000}
    assert _keys(invoice.invoices_recorded) == ["r1:0:0"]
    assert invoice.list_invoices(invoice.ListInvoicesArgs(), _ctx(1)) == {"status": "open", "invoices": ["INV-r1-0-0"]}


def test_the_probe_says_whether_the_payment_was_made(tables):
    invoice.record_invoice(invoice.RecordInvoiceArgs(vendor="ACME", amount_cents=125_000), _ctx(0))
    args = invoice.PayInvoiceArgs(invoice_id="INV-r1-0-0")
    assert invoice.payment_made(args, _ctx(1)) == ProbeAnswer.not_happened()
    paid = invoice.pay_invoice(args, _ctx(1))
    assert invoice.payment_made(args, _ctx(1)) == ProbeAnswer.happened_with(paid)  # the very result the tool returned
    assert invoice.payment_made(args, _ctx(2)) == ProbeAnswer.not_happened()  # another call's reference


def test_an_interrupted_payment_is_recorded_from_the_probe_and_not_made_again(tables):
    invoice.record_invoice(invoice.RecordInvoiceArgs(vendor="ACME", amount_cents=125_000), _ctx(0))
    store, raw = InMemoryStore(), {"invoice_id": "INV-r1-0-0"}
    first = execute_call(invoice.registry, store, _ctx(1), "pay_invoice", raw)
    # The function died before recording `first`: the retry finds the intent and asks the probe.
    retried = execute_call(invoice.registry, store, _ctx(1), "pay_invoice", raw)
    assert retried == first and first["status"] == "success"
    assert _keys(invoice.payments_made) == ["r1:1:0"]  # one payment


def test_the_ledger_shows_a_payment_made_twice(tables):
    invoice.record_invoice(invoice.RecordInvoiceArgs(vendor="ACME", amount_cents=125_000), _ctx(0))
    args = invoice.PayInvoiceArgs(invoice_id="INV-r1-0-0")
    invoice.pay_invoice(args, _ctx(1))
    invoice.pay_invoice(args, _ctx(1))  # what a blind retry would do: the payment system takes it
    assert _keys(invoice.payments_made) == ["r1:1:0", "r1:1:0"]  # the report counts this as a duplicate


def test_marking_paid_checks_first_and_logs_each_update(tables):
    invoice.record_invoice(invoice.RecordInvoiceArgs(vendor="ACME", amount_cents=125_000), _ctx(0))
    store, raw = InMemoryStore(), {"invoice_id": "INV-r1-0-0"}
    assert execute_call(invoice.registry, store, _ctx(2), "mark_paid", raw)["content"] == {"invoice_id": "INV-r1-0-0", "status": "paid"}
    execute_call(invoice.registry, store, _ctx(2), "mark_paid", raw)  # a re-run: the check finds it done
    assert _keys(invoice.invoices_marked_paid) == ["r1:2:0"]


def test_the_world_loader_seeds_the_book(tables):
    world = invoice.build().world.parse({"invoices": [{"invoice_id": "INV-2024-001", "vendor": "Initech", "amount_cents": 45_000}]})
    invoice.load_world(world)
    assert invoice.list_invoices(invoice.ListInvoicesArgs(), _ctx(0))["invoices"] == ["INV-2024-001"]
    assert _keys(invoice.invoices_recorded) == []  # seeded, not recorded by the run
