"""Budgets that ask instead of kill: a run's (and its tenant's) limit in model tokens and dollars.

A run's spend is counted from its recorded model replies (their usage, priced with the prices the
run was started with: ``Budget.prices``), so a replayed turn is never counted twice and a crash
loses nothing. ModelTurn checks the budget before it makes a new model call (a recorded reply
is replayed whatever the budget), so a run is never stopped mid-step:

- past ``ask_at`` of its limit, the run asks once per limit: a ``budget_ask#<n>`` record
  (``run X has spent $4.80 of its $5.00; allow $5.00 more?``) that a human answers with
  ``longstep budget allow``; the run goes on meanwhile;
- at its limit with the ask unanswered (or refused), it stops cleanly: the run's stop request with
  reason ``budget``, so Finish records it as stopped, as ``longstep stop`` would;
- an allowed ask raises the limit by its ``step``, once (the ask record changes state once).

A tenant's budget is the item ``pk = tenant#<tenant>``, ``sk = budget`` of the checkpoint table:
its limits, and each of its runs' spend under an attribute of the run's own (``spent#<run_id>``),
which only that run writes (an idempotent SET of its total): the runs share it without a lost
update. The total is summed on read. Runs that check at once may each make one more model turn
past the tenant's limit: the overshoot is at most one turn per running run of the tenant.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from longstep import clock, keys
from longstep.contract.run import BUDGET_COUNTED, RunRecord
from longstep.store import AlreadyRecordedError, Condition, StepStore

ASK_PREFIX = "budget_ask#"
TENANT_PREFIX = "tenant#"
TENANT_BUDGET = "budget"
SPENT_PREFIX = "spent#"
PENDING, ALLOWED, REFUSED = "pending", "allowed", "refused"
STOP_REASON = "budget"
ASKED_EVENT = "budget.asked"  # in the run's event stream (longstep.events)


class Prices(BaseModel):
    """Dollars per million tokens of the run's model (from the kit's price table at start)."""

    model_config = ConfigDict(extra="forbid")

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class Budget(BaseModel):
    """A run's budget (the start input's ``budget``).

    Attributes:
        usd: the limit in dollars (needs ``prices``).
        tokens: the limit in model tokens (input plus output).
        ask_at: the share of the limit past which the run asks for more (once per limit).
        step: how much more an allowed ask adds, as a share of the first limit (1: as much again).
        prices: the prices of the run's model.
    """

    model_config = ConfigDict(extra="forbid")

    usd: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, gt=0)
    ask_at: float = Field(default=0.8, gt=0, le=1)
    step: float = Field(default=1.0, gt=0, le=100)
    prices: Prices | None = None


def ask_key(index: int) -> str:
    """Sort key of the run's ``index``-th budget ask (0 first)."""
    return f"{ASK_PREFIX}{index:04d}"


def spend(steps: list[Any], prices: Mapping[str, Any] | None) -> dict[str, float]:
    """``tokens`` and ``usd`` of a run's recorded model steps (``StepRecord``s)."""
    tokens_in, tokens_out = _tokens(steps)
    return _priced(tokens_in, tokens_out, prices)


def _tokens(steps: list[Any]) -> tuple[int, int]:
    tokens_in = tokens_out = 0
    for step in steps:
        if step.kind == keys.MODEL:
            usage = (step.result or {}).get("usage") or {}
            tokens_in += int(usage.get("inputTokens", 0))
            tokens_out += int(usage.get("outputTokens", 0))
    return tokens_in, tokens_out


def _priced(tokens_in: int, tokens_out: int, prices: Mapping[str, Any] | None) -> dict[str, float]:
    usd = 0.0
    if prices:
        usd = (tokens_in * float(prices["input_per_million"]) + tokens_out * float(prices["output_per_million"])) / 1_000_000
    return {"tokens": float(tokens_in + tokens_out), "usd": round(usd, 6)}


# The run record's count of the tokens of its turns before ``upto`` (JSON ``{"upto", "in", "out"}``):
# each check reads only the replies recorded since, not the whole run again.
COUNTED = BUDGET_COUNTED


def tokens_before(store: StepStore, run_id: str, run: RunRecord | Mapping[str, Any], turn: int) -> tuple[int, int]:
    """The input and output tokens of the run's recorded replies of turns before ``turn``.

    Counted on from the run record's ``budget_counted`` (a recorded reply never changes, so the
    count only grows), which is moved on when it is behind; two invocations that count at once
    write the same numbers.
    """
    counted = RunRecord.of(run).budgets.counted or {"upto": 0, "in": 0, "out": 0}
    upto = int(counted["upto"])
    if upto > turn:  # counted past this turn (a redrive replaying from earlier): count afresh
        counted, upto = {"upto": 0, "in": 0, "out": 0}, 0
    more_in, more_out = _tokens(store.steps_between(run_id, upto, turn))
    total = (int(counted["in"]) + more_in, int(counted["out"]) + more_out)
    if turn > upto:
        store.update(run_id, keys.RUN_RECORD, {COUNTED: json.dumps({"upto": turn, "in": total[0], "out": total[1]})}, when=Condition(exists=True))
    return total


def check(
    store: StepStore,
    run_id: str,
    run: RunRecord | Mapping[str, Any],
    turn: int,
    on_ask: Callable[[str], None] | None = None,
    listing: Any = None,
) -> str | None:
    """Before the new model call of ``turn``: ask when near a limit. Returns why the run is at a
    limit (it stops, reason ``budget``), else None.

    Args:
        run: the run record (``budget``, ``tenant``).
        on_ask: called with the question when this check asks (once per ask).
        listing: the asks' requests in the approvals inbox (``longstep.humans.budget_asks.AskListing``):
            each ask is listed there, a decision made there is counted, and an ask unanswered at
            the limit is closed. None: the asks are answered with ``answer`` only.
    """
    record = RunRecord.of(run)
    budget = record.budgets.limits
    spent = _priced(*tokens_before(store, run_id, record, turn), (budget or {}).get("prices"))
    tenant = record.tenant
    if tenant:
        over = _tenant_check(store, str(tenant), run_id, spent)
        if over:
            return over
    if not budget:
        return None
    for _ in range(3):  # a decision that lands as the run closes its ask is counted: check again
        asks = store.query_prefix(run_id, ASK_PREFIX)
        if listing is not None:
            asks = [listing.settle(run_id, turn, ask) for ask in asks]
        over, pending = _limits(store, run_id, budget, spent, asks, on_ask, listing, turn)
        if over is None or listing is None or pending is None or listing.close(run_id, pending):
            return over
    return over


def _limits(
    store: StepStore,
    run_id: str,
    budget: dict[str, Any],
    spent: dict[str, float],
    asks: list[dict[str, Any]],
    on_ask: Callable[[str], None] | None,
    listing: Any,
    turn: int,
) -> tuple[str | None, dict[str, Any] | None]:
    """Why the run is at a limit (and its unanswered ask, to close), or asks when near one."""
    allowed = sum(1 for a in asks if a.get("status") == ALLOWED)
    pending = next((a for a in asks if a.get("status") == PENDING), None)
    step = float(budget.get("step", 1.0))
    for unit in ("usd", "tokens"):
        first = budget.get(unit)
        if first is None:
            continue
        limit = float(first) * (1 + allowed * step)
        if spent[unit] >= limit:
            return f"run {run_id} has spent {_amount(unit, spent[unit])} of its {_amount(unit, limit)}", pending
        if spent[unit] >= float(budget.get("ask_at", 0.8)) * limit and len(asks) == allowed:
            record = _ask(store, run_id, len(asks), unit, spent[unit], limit, float(first) * step, listing)
            if record is not None and listing is not None:
                listing.settle(run_id, turn, record)
            if record is not None and on_ask is not None:
                on_ask(record["question"])
            return None, None
    return None, None


def _decoded(raw: Any) -> dict[str, Any] | None:
    return json.loads(raw) if isinstance(raw, str) else raw


def _ask(store: StepStore, run_id: str, index: int, unit: str, spent: float, limit: float, more: float, listing: Any = None) -> dict[str, Any] | None:
    """Record the ``index``-th ask; the record, or None when a retried ModelTurn asked already."""
    question = f"run {run_id} has spent {_amount(unit, spent)} of its {_amount(unit, limit)}; allow {_amount(unit, more)} more?"
    record = {"status": PENDING, "unit": unit, "spent": spent, "limit": limit, "more": more, "question": question, "asked_at": clock.now()}
    if listing is not None:  # its request's id in the approvals table, chosen once with the ask
        record["approval_id"] = listing.new_id()
    try:
        store.put_once(run_id, ask_key(index), record)
    except AlreadyRecordedError:
        return None
    return {**record, "sk": ask_key(index)}


def answer(store: StepStore, run_id: str, allow: bool, who: str, decide: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Answer the run's pending ask (allow: its limit grows by the ask's ``more``, once).

    Args:
        decide: decides an ask listed in the approvals inbox as its request
            (``longstep.humans.budget_asks.decide``: the first decision there wins); without it,
            the ask's record is answered directly.

    Raises:
        LookupError: the run has no pending ask.
    """
    for record in reversed(store.query_prefix(run_id, ASK_PREFIX)):
        if record.get("status") != PENDING:
            continue
        if decide is not None and record.get("listed"):
            decide(record)
            return store.get(run_id, record["sk"]) or record
        values = {"status": ALLOWED if allow else REFUSED, "answered_by": who, "answered_at": clock.now()}
        # Answered here only while the ask is not listed in the approvals inbox: if its listing
        # lands first, the decision goes through the inbox's request (the first decision wins
        # there); if this lands first, the listing records it on the request (AskListing).
        unlisted = ("listed",) if decide is not None and record.get("approval_id") else ()
        if store.update(run_id, record["sk"], values, when=Condition(exists=True, equal={"status": PENDING}, absent=unlisted)) is not None:
            return {**record, **values}
        fresh = store.get(run_id, record["sk"]) or {}
        if decide is not None and fresh.get("status") == PENDING and fresh.get("listed"):
            decide(fresh)
            return store.get(run_id, record["sk"]) or fresh
    raise LookupError(f"run_id: run {run_id} has no pending budget ask")


def pending_asks(store: StepStore, run_id: str) -> list[dict[str, Any]]:
    """The run's budget asks, oldest first."""
    return store.query_prefix(run_id, ASK_PREFIX)


def set_tenant_limit(store: StepStore, tenant: str, usd: float | None = None, tokens: float | None = None) -> None:
    """A tenant's limits (changed live: each of its runs reads them before its next model call)."""
    values = {name: value for name, value in (("limit_usd", usd), ("limit_tokens", tokens)) if value is not None}
    store.update(f"{TENANT_PREFIX}{tenant}", TENANT_BUDGET, values)


def tenant_spend(store: StepStore, tenant: str) -> dict[str, Any]:
    """A tenant's limits and what its runs have spent (summed over their attributes)."""
    record = store.get(f"{TENANT_PREFIX}{tenant}", TENANT_BUDGET) or {}
    total = {"usd": 0.0, "tokens": 0.0}
    for name, value in record.items():
        if name.startswith(SPENT_PREFIX):
            spent = json.loads(value)
            total = {unit: total[unit] + float(spent.get(unit, 0)) for unit in total}
    return {"limit_usd": record.get("limit_usd"), "limit_tokens": record.get("limit_tokens"), **total}


def _tenant_check(store: StepStore, tenant: str, run_id: str, spent: dict[str, float]) -> str | None:
    """Record the run's spend in its tenant's budget (when the tenant has one) and say whether the
    tenant is at a limit."""
    record = store.get(f"{TENANT_PREFIX}{tenant}", TENANT_BUDGET)
    if not record or (record.get("limit_usd") is None and record.get("limit_tokens") is None):
        return None
    store.update(f"{TENANT_PREFIX}{tenant}", TENANT_BUDGET, {f"{SPENT_PREFIX}{run_id}": json.dumps(spent)}, when=Condition(exists=True))
    state = tenant_spend(store, tenant)
    for unit in ("usd", "tokens"):
        limit = state.get(f"limit_{unit}")
        if limit is not None and state[unit] >= float(limit):
            return f"tenant {tenant} has spent {_amount(unit, state[unit])} of its {_amount(unit, float(limit))}"
    return None


def _amount(unit: str, value: float) -> str:
    return f"${value:.2f}" if unit == "usd" else f"{int(value):,} tokens"
