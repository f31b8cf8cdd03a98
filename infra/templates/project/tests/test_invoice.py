"""The example agent: its tools' contracts, and runs end to end on the local stack (moto), with
crashes: each ends as the clean run did, and the ledgers count no payment twice."""

from pathlib import Path

import pytest

from functions import invoice
from longstep import Effect

SCENARIO = Path(__file__).resolve().parent.parent / "events" / "scenarios" / "invoice.json"
PAY_TURN = 1  # the scenario's turn that pays (pay_invoice, after an approval)


def test_each_tool_declares_how_it_stays_safe_when_replayed():
    """Properties of every tool, whatever tools the agent has (add yours: this test still holds)."""
    tools = invoice.registry.tools
    assert tools, "the agent has no tools"
    for name, t in tools.items():
        assert isinstance(t.effect, Effect), f"{name}: declare effect=Effect.READ, KEYED, CHECK_THEN_ACT or AT_MOST_ONCE"
        # A tool that acts lists its effects (a ledger), so a duplicate of any of them would be counted.
        assert t.effect is Effect.READ or t.ledger is not None, f"{name}: acts on the world but declares no ledger"
        # At most once: a crash right after its effect is answered by a probe, or a human decides first.
        assert t.effect is not Effect.AT_MOST_ONCE or t.probe is not None or t.requires_approval, f"{name}: at_most_once with no probe"
    # The example's payment is the call a crash must never repeat: approved first, then probed.
    pay = tools["pay_invoice"]
    assert pay.effect is Effect.AT_MOST_ONCE and pay.requires_approval and pay.probe is invoice.payment_made


def test_the_agent_declares_its_tables_and_world():
    agent = invoice.build()
    assert [r.name for r in agent.resources] == ["invoices", "payments"]
    assert agent.world.parse({"invoices": [{"invoice_id": "INV-1", "vendor": "ACME", "amount_cents": 100}]}).invoices[0].status == "open"


@pytest.fixture(scope="module")
def runs():
    """Runs of the scenario on one local stack: each from an empty world (its ids derive from the run id)."""
    from longstep_kit.testing import Fault, LocalStack, RunOptions, load_scenario, random_faults, run_scenario

    scenario = load_scenario(SCENARIO)
    plans = {
        "clean": [],
        "after_record": [Fault("after_effect", 0)],  # right after the first invoice was recorded
        "after_payment": [Fault("after_effect", PAY_TURN)],  # right after the payment, before it was recorded
        # What `longstep local run events/scenarios/invoice.json --faults random:8 --seed 3` injects.
        "random": random_faults("random:8", 3, len(scenario.turns)),
    }
    out = {}
    with LocalStack() as stack:
        for name, plan in plans.items():
            stack.reset_data()
            out[name] = run_scenario(stack, scenario, RunOptions(execution_name=name, faults=plan))
    return scenario, out


def test_the_clean_run_meets_its_expectations(runs):
    from longstep_kit.testing import unmet_expectations

    scenario, reports = runs
    clean = reports["clean"]
    assert clean["status"] == "SUCCEEDED", clean.get("cause")
    assert unmet_expectations(scenario.expect, clean) == []
    assert clean["effects"]["by_tool"] == {"mark_paid": 1, "pay_invoice": 1, "record_invoice": 2}
    assert [(a["tool"], a["status"]) for a in clean["approvals"]] == [("pay_invoice", "approved")]


@pytest.mark.parametrize("name", ["after_record", "after_payment", "random"])
def test_a_crashed_run_ends_as_the_clean_one_with_no_duplicate(runs, name):
    _, reports = runs
    clean, crashed = reports["clean"], reports[name]
    assert crashed["faults_injected"]
    assert crashed["status"] == "SUCCEEDED", crashed.get("cause")
    assert crashed["transcript_sha256"] == clean["transcript_sha256"]
    assert crashed["effects"] == clean["effects"]  # counted from the ledgers: nothing twice
    assert crashed["effects"]["duplicate_effects"] == 0


def test_a_crash_right_after_the_payment_is_resolved_by_the_probe_without_a_human(runs):
    _, reports = runs
    crashed = reports["after_payment"]
    assert [(f["point"], f["turn"]) for f in crashed["faults_injected"]] == [("after_effect", PAY_TURN)]
    # The payment was made, then the invocation died before its result was recorded: the retry
    # found the intent, asked the probe, and recorded the payment the probe found.
    assert crashed["escalations"] == []
    assert crashed["effects"]["by_tool"]["pay_invoice"] == 1
