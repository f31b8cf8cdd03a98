"""A budget ask as a request in the approvals inbox, on moto's tables: listed once, decided once,
a decision that never reached the ask taken by the run's next check, a decision that lands as the
run closes its ask counted, and an ask closed at the limit refused to a late decision."""

from __future__ import annotations

import boto3
import pytest

from longstep import budget, keys
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError, BadRequestError
from longstep.humans import budget_asks
from longstep.humans.requests import list_approvals
from longstep.humans.table import ApprovalTable, Decision
from longstep.store import CheckpointStore

RUN = "budget-run-1"
APPROVE = Decision(decision="approve", approver="alice")


@pytest.fixture
def tables(aws):
    ddb = boto3.client("dynamodb")
    return CheckpointStore("checkpoints", ddb), ApprovalTable("approvals", ddb)


def _check(store: CheckpointStore, listing: budget_asks.AskListing, upto: int) -> str | None:
    """Record 100 tokens a turn before ``upto``, then check before turn ``upto`` (limit 400, ask at half)."""
    for turn in range(upto):
        if store.get_step(RUN, keys.model_step_key(turn)) is None:
            store.record_step(RUN, keys.model_step_key(turn), "model", "converse", {"usage": {"inputTokens": 60, "outputTokens": 40}})
    return budget.check(store, RUN, store.get(RUN, keys.RUN_RECORD), upto, listing=listing)


def _asked(store: CheckpointStore, listing: budget_asks.AskListing) -> dict:
    """A run with 400 tokens that has spent 200 and asked; its request."""
    store.put_once(RUN, keys.RUN_RECORD, {"agent": "fleet", "budget": {"tokens": 400, "ask_at": 0.5}})
    assert _check(store, listing, 2) is None
    (request,) = list_approvals(table_of(listing), "pending", RUN)
    return request


def table_of(listing: budget_asks.AskListing) -> ApprovalTable:
    return listing.table


def test_an_ask_is_listed_once_with_its_question(tables):
    store, table = tables
    listing = budget_asks.AskListing(table, store, "fleet")
    _asked(store, listing)  # 200 of 400: it asks
    assert _check(store, listing, 2) is None  # a retried turn asks nothing more
    (request,) = list_approvals(table, "pending", RUN)
    assert request["tool"] == budget_asks.BUDGET_TOOL and request["call"] == 0 and request["turn"] == 2
    assert request["input"]["question"] == f"run {RUN} has spent 200 tokens of its 400 tokens; allow 400 tokens more?"
    (ask,) = budget.pending_asks(store, RUN)
    assert ask["approval_id"] == request["approval_id"] and ask["listed"] is True


def test_a_decision_that_never_reached_the_ask_is_taken_by_the_next_check(tables):
    store, table = tables
    listing = budget_asks.AskListing(table, store, "fleet")
    request = _asked(store, listing)
    table.record_decision(request["approval_id"], APPROVE)  # the approver's process died here
    assert budget.pending_asks(store, RUN)[0]["status"] == "pending"
    assert _check(store, listing, 4) is None  # 400 spent, but the limit is 800 now
    asks = budget.pending_asks(store, RUN)
    assert asks[0]["status"] == "allowed" and asks[0]["answered_by"] == "alice"
    assert [a["status"] for a in asks] == ["allowed", "pending"]  # and it asked again, at half of 800


class HumanWinsTheRace(budget_asks.AskListing):
    """An approver's decision lands between the run's settling of its ask and its closing."""

    def close(self, run_id, ask):
        if ask.get("approval_id") and self.table.get(ask["approval_id"])["status"] == "pending":
            self.table.record_decision(ask["approval_id"], APPROVE)
        return super().close(run_id, ask)


def test_a_decision_that_lands_as_the_run_closes_its_ask_is_counted(tables):
    store, table = tables
    listing = HumanWinsTheRace(table, store, "fleet")
    _asked(store, listing)
    assert _check(store, listing, 4) is None  # at 400 it would stop: the approval came first
    assert budget.pending_asks(store, RUN)[0]["status"] == "allowed"


def test_an_ask_unanswered_at_the_limit_is_closed(tables):
    store, table = tables
    listing = budget_asks.AskListing(table, store, "fleet")
    _asked(store, listing)
    assert _check(store, listing, 4) == f"run {RUN} has spent 400 tokens of its 400 tokens"
    (request,) = list_approvals(table, "expired", RUN)
    with pytest.raises(ApprovalExpiredError):
        budget_asks.decide(table, store, request["approval_id"], APPROVE)
    assert budget.pending_asks(store, RUN)[0]["status"] == "pending"  # never allowed


def test_decided_once_and_never_edited(tables):
    store, table = tables
    listing = budget_asks.AskListing(table, store, "fleet")
    request = _asked(store, listing)
    with pytest.raises(BadRequestError, match="decision"):
        budget_asks.decide(table, store, request["approval_id"], Decision(decision="edit", input={"tokens": 1}))
    decider = lambda record: budget_asks.decide(table, store, record["approval_id"], APPROVE)  # noqa: E731
    answered = budget.answer(store, RUN, allow=True, who="alice", decide=decider)
    assert answered["status"] == "allowed" and table.get(request["approval_id"])["status"] == "approved"
    with pytest.raises(ApprovalAlreadyDecidedError):
        budget_asks.decide(table, store, request["approval_id"], Decision(decision="reject", reason="no", approver="bob"))
    with pytest.raises(LookupError):
        budget.answer(store, RUN, allow=False, who="bob", decide=decider)


def test_an_ask_answered_directly_as_its_listing_lands_leaves_no_pending_request(tables):
    # longstep budget allow read the ask before the run listed it, and answered its record: the
    # listing that follows records the same answer on the request, so the inbox offers nothing.
    store, table = tables

    class AnsweredFirst(ApprovalTable):
        def create(self, approval_id, attrs):
            budget.answer(
                store, RUN, allow=True, who="bob", decide=lambda record: budget_asks.decide(table, store, str(record["approval_id"]), APPROVE)
            )
            return super().create(approval_id, attrs)

    listing = budget_asks.AskListing(AnsweredFirst("approvals", table.client), store, "fleet")
    store.put_once(RUN, keys.RUN_RECORD, {"agent": "fleet", "budget": {"tokens": 400, "ask_at": 0.5}})
    assert _check(store, listing, 2) is None
    (ask,) = budget.pending_asks(store, RUN)
    assert (ask["status"], ask["answered_by"], ask["listed"]) == (budget.ALLOWED, "bob", True)
    assert list_approvals(table, "pending", RUN) == []
    request = table.get(str(ask["approval_id"]))
    assert (request["status"], request["approver"]) == ("approved", "bob")


def test_an_answer_that_read_the_ask_before_its_listing_goes_through_the_request(tables):
    # The other order: the listing landed between the answer's read and its write. The write is
    # refused (the ask is listed now) and the answer decides the request instead: one decision.
    store, table = tables
    listing = budget_asks.AskListing(table, store, "fleet")
    request = _asked(store, listing)

    class StaleRead(CheckpointStore):
        def query_prefix(self, run_id, prefix, *args, **kwargs):
            return [{k: v for k, v in r.items() if k != "listed"} for r in super().query_prefix(run_id, prefix, *args, **kwargs)]

    stale = StaleRead("checkpoints", store.client)
    answered = budget.answer(
        stale, RUN, allow=True, who="bob", decide=lambda record: budget_asks.decide(table, store, str(record["approval_id"]), APPROVE)
    )
    assert answered["status"] == budget.ALLOWED and answered.get("answered_by") != "bob"  # through the inbox, as alice
    assert table.get(request["approval_id"])["status"] == "approved" and list_approvals(table, "pending", RUN) == []
