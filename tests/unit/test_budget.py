"""Budgets on the in-memory store: counted from recorded replies, an ask once per limit, a stop
at the limit, an allowed ask raising it once, a tenant's spend shared by attribute per run, and
a start input's dollar budget priced from the kit's price table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longstep import budget, keys
from longstep.errors import InvalidInputError
from longstep.inmemory import InMemoryStore
from longstep.inputs import StartInput, parse_model
from longstep.store import StepRecord
from longstep_kit.ops.fleet_budget import priced_budget
from longstep_kit.ops.views.cost import load_prices

PRICES = {"input_per_million": 3.0, "output_per_million": 15.0}


def _steps(turns: int, tokens_in: int = 100_000, tokens_out: int = 10_000) -> list[StepRecord]:
    usage = {"inputTokens": tokens_in, "outputTokens": tokens_out}
    return [StepRecord(sk=keys.model_step_key(t), kind="model", name="converse", result={"usage": usage}) for t in range(turns)]


class Run:
    """A run in the in-memory store whose turns record 110,000 tokens each."""

    def __init__(self, store: InMemoryStore, run_id: str, **record) -> None:
        self.store, self.run_id, self.turns = store, run_id, 0
        store.put_once(run_id, keys.RUN_RECORD, {"agent": "a", **record})

    def check(self, upto: int) -> str | None:
        """Record the replies of the turns before ``upto``, then check before turn ``upto``."""
        for step in _steps(upto)[self.turns :]:
            self.store.record_step(self.run_id, step.sk, "model", "converse", step.result)
        self.turns = max(self.turns, upto)
        return budget.check(self.store, self.run_id, self.store.get(self.run_id, keys.RUN_RECORD), upto)


def test_spend_is_priced_from_the_recorded_usage():
    assert budget.spend(_steps(2), PRICES) == {"tokens": 220_000.0, "usd": 0.9}  # 2 x (0.3 + 0.15)


def test_the_count_reads_only_the_replies_recorded_since_the_last_check():
    store = InMemoryStore("t")
    run = Run(store, "r1")
    assert run.check(3) is None
    counted = json.loads(store.get("r1", keys.RUN_RECORD)[budget.COUNTED])
    assert counted == {"upto": 3, "in": 300_000, "out": 30_000}
    store.record_step("r1", keys.model_step_key(3), "model", "converse", {"usage": {"inputTokens": 1, "outputTokens": 2}})
    assert budget.tokens_before(store, "r1", store.get("r1", keys.RUN_RECORD), 4) == (300_001, 30_002)
    # A check of an earlier turn (a run replaying from there) counts afresh, not from the later count.
    assert budget.tokens_before(store, "r1", store.get("r1", keys.RUN_RECORD), 2) == (200_000, 20_000)


def test_a_run_asks_near_its_limit_then_stops_at_it_unless_allowed():
    store = InMemoryStore("t")
    run = Run(store, "r1", budget=json.dumps({"usd": 1.0, "ask_at": 0.8, "prices": PRICES}))
    assert run.check(1) is None and budget.pending_asks(store, "r1") == []  # $0.45
    assert run.check(2) is None  # $0.90: past 80%, it asks (once)
    assert run.check(2) is None
    (ask,) = budget.pending_asks(store, "r1")
    assert ask["question"] == "run r1 has spent $0.90 of its $1.00; allow $1.00 more?"
    assert run.check(3) == "run r1 has spent $1.35 of its $1.00"
    assert budget.answer(store, "r1", allow=True, who="alice")["status"] == "allowed"
    with pytest.raises(LookupError):
        budget.answer(store, "r1", allow=True, who="alice")  # answered once
    assert run.check(3) is None  # the limit is $2.00 now
    assert run.check(4) is None  # $1.80: a second ask
    assert [a["status"] for a in budget.pending_asks(store, "r1")] == ["allowed", "pending"]
    assert budget.answer(store, "r1", allow=False, who="bob")["status"] == "refused"
    assert run.check(5) == "run r1 has spent $2.25 of its $2.00"


def test_a_tenant_budget_sums_its_runs_spend():
    store = InMemoryStore("t")
    assert Run(store, "r0", tenant="acme").check(5) is None  # no tenant budget: nothing written
    assert store.get("tenant#acme", budget.TENANT_BUDGET) is None
    budget.set_tenant_limit(store, "acme", tokens=500_000)
    first = Run(store, "r1", tenant="acme")
    assert first.check(1) is None
    assert first.check(1) is None  # the same total again: counted once
    assert Run(store, "r2", tenant="acme").check(2) is None
    assert budget.tenant_spend(store, "acme")["tokens"] == 330_000
    assert Run(store, "r3", tenant="acme").check(2) == "tenant acme has spent 550,000 tokens of its 500,000 tokens"


def test_a_dollar_budget_needs_prices_and_the_kit_fills_them():
    base = {"run_id": "r1", "goal": "g", "agent": "a"}
    with pytest.raises(InvalidInputError) as caught:
        parse_model(StartInput, {**base, "budget": {"usd": 5}}, "start input")
    assert "budget" in str(caught.value) and "prices" in str(caught.value)
    with pytest.raises(InvalidInputError):
        parse_model(StartInput, {**base, "budget": {"ask_at": 0.5}}, "start input")
    prices = load_prices((Path(__file__).resolve().parents[2] / "infra" / "prices.json").read_text())
    priced = priced_budget({"usd": 5}, "anthropic.claude-sonnet-4-6", prices)
    assert priced["prices"] == {"input_per_million": 3.0, "output_per_million": 15.0}
    assert parse_model(StartInput, {**base, "budget": priced}, "start input").budget.usd == 5
