"""The example agent: its tools' contracts, and a run end to end on the local stack (moto)."""

from pathlib import Path

from agents import invoice
from longstep.tools.registry import Effect

SCENARIO = Path(__file__).resolve().parent.parent / "events" / "scenarios" / "invoice.json"


def test_each_tool_declares_how_it_stays_safe_when_replayed():
    effects = {name: t.effect for name, t in invoice.registry.tools.items()}
    assert effects == {"record_invoice": Effect.KEYED, "list_invoices": Effect.READ, "mark_paid": Effect.CHECK_THEN_ACT}


def test_the_agent_declares_its_table():
    assert [r.name for r in invoice.build().resources] == ["invoices"]


def test_a_run_on_the_local_stack_succeeds_and_survives_a_crash():
    from longstep_kit.local.faults import Fault
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.stack import LocalStack

    scenario = load_scenario(SCENARIO)
    with LocalStack() as stack:
        # The scenario's run id is "invoice" (its ids derive from it): each run starts from an empty world.
        clean = run_scenario(stack, scenario, RunOptions(execution_name="clean"))
        stack.reset_data()
        crashed = run_scenario(stack, scenario, RunOptions(execution_name="crashed", faults=[Fault("after_effect", 0)]))
    assert clean["status"] == "SUCCEEDED", clean.get("cause")
    assert "Globex" in clean["output"]
    # A crash right after the first invoice was recorded: the keyed call runs again, records
    # nothing twice, and the run is the same run.
    assert crashed["status"] == "SUCCEEDED", crashed.get("cause")
    assert crashed["transcript_sha256"] == clean["transcript_sha256"]
    assert crashed["faults_injected"]
