"""A run's budget ask (``longstep.budget``) in the approvals inbox, decided like any approval.

Each ask is also a request in the approvals table, under the id its checkpoint record names
(``approval_id``, chosen when the ask is recorded): it is listed, notified, linked and decided as
any approval is (``longstep approvals``, ``GET /approvals``, the inbox and decision pages). Its
``tool`` is ``BUDGET_TOOL``, a name no model tool can have, and its ``input`` carries the
question; its ``call`` is the ask's index. It is approved (the run may spend ``more``) or
rejected; it cannot be edited.

The first decision wins on the approvals table (``ApprovalTable.record_decision``: a conditional
update), then goes to the ask's record. A crash between the two loses nothing: before each new
model call the run settles its pending ask from the approvals table (``settle``). At its limit
with the ask unanswered, the run closes it (``close``: expired, so a later decision is told so);
a decision that got there first is kept, and counted. A run that ends any other way closes its
pending ask too (``close_asks``: Finish, and the fleet's end rule for a failed or aborted run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from longstep import budget, clock, keys
from longstep.errors import BadRequestError, LongstepError
from longstep.humans.requests import view
from longstep.humans.table import APPROVED, EXPIRED, PENDING, REJECTED, ApprovalTable, Decision, new_approval_id
from longstep.settings import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from longstep.store import Condition, StepStore

# Bedrock's tool names are [a-zA-Z0-9_-]+ (ToolSpecification.name), so no tool is called this:
# https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolSpecification.html
BUDGET_TOOL = "longstep.budget"
ANSWER_OF = {APPROVED: budget.ALLOWED, REJECTED: budget.REFUSED}


def is_budget_ask(item: dict[str, Any]) -> bool:
    """Whether an approvals-table item (or view) is a budget ask."""
    return item.get("tool") == BUDGET_TOOL


def check_decision(decision: str) -> None:
    """A budget ask is approved or rejected.

    Raises:
        BadRequestError: naming ``decision``, for an edit.
    """
    if decision not in ("approve", "reject"):
        raise BadRequestError("decision", f"a budget ask is approved or rejected, got {decision!r}")


@dataclass
class AskListing:
    """The approvals-table side of a run's budget asks (what ``budget.check`` is given).

    Args:
        table: the approvals table.
        store: the checkpoint table.
        agent: the run's agent (approvers' inboxes by agent list its asks).
        timeout_seconds: how long an ask can be decided (the approval timeout).
        notify: as ``requests.request``'s: approvers hear of each ask.
    """

    table: ApprovalTable
    store: StepStore
    agent: str
    timeout_seconds: int = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    notify: Callable[[dict[str, Any]], None] | None = None

    def new_id(self) -> str:
        """The id of a new ask's request (unguessable, as every approval's)."""
        return new_approval_id()

    def settle(self, run_id: str, turn: int, ask: dict[str, Any]) -> dict[str, Any]:
        """The ask as the run counts it: a pending ask is listed if it is not yet, or takes the
        decision recorded on its request."""
        if ask.get("status") != budget.PENDING or not ask.get("approval_id"):
            return ask
        if not ask.get("listed"):
            self._list(run_id, turn, ask)
            return {**ask, "listed": True}
        item = self.table.get(str(ask["approval_id"]))
        answer = ANSWER_OF.get(str((item or {}).get("status")))
        if item is None or answer is None:
            return ask
        return deliver(self.store, item, answer) or ask

    def close(self, run_id: str, ask: dict[str, Any]) -> bool:
        """The run is at its limit with ``ask`` unanswered: its request expires. False when a
        decision was recorded first (the caller settles the ask again)."""
        if ask.get("status") != budget.PENDING or not ask.get("listed"):
            return True
        item = self.table.get(str(ask["approval_id"]))
        if item is None or item.get("status") == EXPIRED:
            return True
        return item.get("status") == PENDING and self.table.expire(str(ask["approval_id"]))

    def _list(self, run_id: str, turn: int, ask: dict[str, Any]) -> None:
        index = int(str(ask["sk"]).removeprefix(budget.ASK_PREFIX))
        approval_id = str(ask["approval_id"])
        attrs = {
            "run_id": run_id,
            "turn": turn,
            "call": index,
            "run_call": keys.approval_run_call(run_id, turn, index),
            "tool": BUDGET_TOOL,
            "input": {name: ask.get(name) for name in ("question", "unit", "spent", "limit", "more")},
            "agent": self.agent,
            "expires_at": self.table.clock() + self.timeout_seconds,
        }
        self.table.create(approval_id, attrs)  # False: a retried turn listed it already
        item = self.table.get(approval_id)
        if self.notify is not None and item is not None and not item.get("notified_at"):
            try:
                self.notify(view(item))
            except Exception as exc:  # noqa: BLE001 - the ask stands: approvers can still list it
                from longstep.humans.notifications import log_failed_notification

                log_failed_notification(approval_id, exc)
            else:
                self.table.mark_notified(approval_id)
        before = self.store.update(run_id, str(ask["sk"]), {"listed": True}, when=Condition(exists=True)) or {}
        if before.get("status") in (budget.ALLOWED, budget.REFUSED):
            # Answered directly (``budget.answer``) while this listing was on its way: the request
            # says so too, or the inbox would offer an ask already answered.
            allowed = before["status"] == budget.ALLOWED
            decision = Decision(
                decision="approve" if allowed else "reject",
                reason=None if allowed else "refused before the ask was listed",
                approver=str(before.get("answered_by") or "unknown"),
            )
            try:
                self.table.record_decision(approval_id, decision)
            except LongstepError:  # decided or expired meanwhile: it is not pending either way
                pass


def close_asks(table: ApprovalTable, store: StepStore, run_id: str) -> int:
    """The run has ended (finished, stopped, failed, aborted): its pending asks' requests expire,
    so the inbox no longer lists them and a later decision is told so. A decision recorded first
    is kept. Returns how many were closed."""
    closed = 0
    for ask in budget.pending_asks(store, run_id):
        if ask.get("status") == budget.PENDING and ask.get("approval_id"):
            closed += table.expire(str(ask["approval_id"]))  # False: decided first, or never listed
    return closed


def deliver(store: StepStore, item: dict[str, Any], answer: str) -> dict[str, Any] | None:
    """Hand a decided request's answer to its ask's record (once: only a pending ask changes).

    Returns:
        The ask after it, or None when the ask is gone.
    """
    sk = budget.ask_key(int(item["call"]))
    values = {"status": answer, "answered_by": item.get("approver") or "unknown", "answered_at": clock.now()}
    before = store.update(str(item["run_id"]), sk, values, when=Condition(exists=True, equal={"status": budget.PENDING}))
    if before is not None:
        return {**before, **values}
    return store.get(str(item["run_id"]), sk)


def decide(table: ApprovalTable, store: StepStore, approval_id: str, decision: Decision) -> dict[str, Any]:
    """Record a decision on a budget ask's request (the first wins), then hand it to the ask.

    Raises:
        BadRequestError: an edit.
        ApprovalNotFoundError, ApprovalAlreadyDecidedError, ApprovalExpiredError: as any approval.
    """
    check_decision(decision.decision)
    item = table.record_decision(approval_id, decision)
    deliver(store, item, ANSWER_OF[str(item["status"])])
    return view(item)


def question_of(request: dict[str, Any]) -> str:
    """A budget ask's question, from its request's view or item."""
    raw = request.get("input")
    shown = json.loads(raw) if isinstance(raw, str) else raw or {}
    return str(shown.get("question", ""))
