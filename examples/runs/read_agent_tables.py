"""Read the agent's own tables after a local run: what its tools wrote (the tickets triage filed)."""

from longstep_kit.testing import LocalStack, RunOptions, agent_items, agent_tables, load_scenario, run_scenario


def tickets_after_triage(run_id: str = "triage-tables") -> tuple[str, dict[str, str], list[dict]]:
    """Run the triage scenario locally; its status, the agent's tables and the tickets table's items."""
    with LocalStack() as stack:
        report = run_scenario(stack, load_scenario("events/scenarios/triage.json"), RunOptions(run_id=run_id))
        return report["status"], agent_tables(stack, "triage"), agent_items(stack, "triage", "tickets")
