"""A workflow with every kind of context call: steps under effect classes, a parallel fan-out,
an approval, a signal with a timeout, and a durable sleep.

Run by tests/unit/test_workflow_examples.py with ``longstep.workflows.testing.run_in_memory``.
"""

from __future__ import annotations

from typing import Any

from longstep import Call, StepFailedError, StepInfo, Workflow, WorkflowContext

# Stand-ins for the systems the steps talk to (a real workflow calls AWS or HTTP APIs here).
WAREHOUSE: dict[str, Any] = {}
CHARGES: list[str] = []


def price(args: dict[str, Any], info: StepInfo) -> int:
    """A read: no effect, safe to run again."""
    return {"book": 12, "pen": 2}.get(args["item"], 5) * args["qty"]


def reserve(args: dict[str, Any], info: StepInfo) -> str:
    """Keyed: the warehouse deduplicates on the step's idempotency key."""
    WAREHOUSE.setdefault(info.idempotency_key, args)
    return info.idempotency_key


def charged(args: dict[str, Any], info: StepInfo) -> str | None:
    """The check of a check-then-act step: the charge's id if it went through before."""
    return next((c for c in CHARGES if c.startswith(f"{args['order']}:")), None)


def charge(args: dict[str, Any], info: StepInfo) -> str:
    CHARGES.append(f"{args['order']}:{args['amount']}")
    return CHARGES[-1]


def order(ctx: WorkflowContext, request: dict[str, Any]) -> dict[str, Any]:
    # Several independent reads at once; results come back in the order given.
    prices = ctx.parallel([Call(price, line, name=f"price-{line['item']}") for line in request["lines"]])
    total = sum(prices)
    if total > 100:  # branch only on what the context returned: the same on every replay
        decision = ctx.approval("large-order", {"order": request["order"], "total": total})
        if decision["decision"] != "approve":
            return {"order": request["order"], "status": "refused"}
    reservation = ctx.step(reserve, {"order": request["order"], "lines": request["lines"]}, effect="keyed")
    try:
        receipt = ctx.step(charge, {"order": request["order"], "amount": total}, effect="check_then_act", check=charged)
    except StepFailedError as failed:  # recorded: every replay takes the same path
        return {"order": request["order"], "status": "payment failed", "why": failed.message}
    shipped = ctx.wait_for("shipped", match={"order": request["order"]}, timeout_seconds=3 * 86_400)
    if shipped is None:
        return {"order": request["order"], "status": "not shipped in 3 days", "receipt": receipt}
    ctx.sleep(days=14)  # a Wait state: no compute for two weeks
    return {"order": request["order"], "status": "done", "reservation": reservation, "receipt": receipt, "carrier": shipped["carrier"]}


def build() -> Workflow:
    return Workflow(order)
