"""RequestApproval: a decision on a tool call, asked of a human; the task parks on its token and
holds no compute meanwhile."""

from __future__ import annotations

from typing import Any

from longstep import events, keys
from longstep.claims import is_claim
from longstep.humans import requests
from longstep.humans.notifications import publisher
from longstep.inputs import parse_model, task_token
from longstep.contract.call import CallItem
from longstep.contract.steps import ParkedOutput
from longstep.runtime import Runtime
from longstep.tasks.common import load_run, tool_use


def request_approval(rt: Runtime, event: Any) -> ParkedOutput:
    """RequestApproval: record a pending approval holding the task token (never returned or logged).

    A re-invocation after the decision was recorded hands the recorded decision to the new token,
    so a retry cannot leave the run waiting for a decision that was already made.
    """
    token = task_token(event)
    item = parse_model(CallItem, event.get("item"), "approval item")
    use = tool_use(rt, item)
    run = load_run(rt, item.run_id)
    settings = rt.settings.approvals
    notify = publisher(rt.notifications(), settings)  # the topic and the webhook, with the decision page's link
    words = _words(rt, run.agent, use)
    outcome = requests.request(
        rt.approvals(),
        rt.store,
        rt.step_functions(),
        run_id=item.run_id,
        turn=item.turn,
        call=item.call,
        tool=use["name"],
        tool_input=use["input"],
        agent=run.agent,
        token=token,
        timeout_seconds=settings.timeout_seconds,
        notify=None if notify is None else (lambda view: notify({**view, **words})),
        unanswered=lambda: _unanswered(rt, item),
    )
    if outcome.get("status") == "pending":
        # The request's id, never its link: a decision link is a bearer credential, minted for
        # whoever may decide (``longstep approvals``, the inbox), not stored in the stream.
        rt.events.emit(
            item.run_id, events.APPROVAL_REQUESTED, turn=item.turn, call=item.call, tool=use["name"], approval_id=outcome.get("approval_id")
        )
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, **outcome}


def _words(rt: Runtime, agent: str, use: dict[str, Any]) -> dict[str, str]:
    """The call in the tool's own words for the notification (``summary``, ``risk``); none when the
    tool cannot be read (the notification still goes out)."""
    try:
        tool = rt.resolve_agent(agent).tools.get(use["name"])
        return {"summary": tool.summary_of(use["input"]), "risk": tool.risk_text()}
    except Exception:  # noqa: BLE001 - the words are a courtesy: the request and its link stand without them
        return {}


def _unanswered(rt: Runtime, item: CallItem) -> bool:
    """The call has no recorded result (at most a claim of an attempt under way)."""
    found = rt.store.get(item.run_id, keys.tool_step_key(item.turn, item.call))
    return found is None or is_claim(found)
