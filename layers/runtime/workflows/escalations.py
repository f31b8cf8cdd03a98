"""Escalations of workflow steps: a step that cannot go on by itself waits for a human.

The state machine catches what retries could not fix on a pass (an at-most-once step whose
outcome is unknown, a step that kept failing, a non-determinism error awaiting a code fix) and
parks the run on a task token (``escalate``) in the same escalation record an agent's failed
tool call uses (``longstep.humans.escalations``, keyed by position and branch), so the same
CLI and API list and answer it. The answer is read back from that record, not from the state
machine's input, and consumed once (``take_answer``): a later crash of the same step escalates
again instead of reusing an old answer.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import keys
from longstep.humans import waiting
from longstep.runtime import Runtime
from longstep.claims import is_claim
from longstep.store import Condition, StepStore
from longstep.inputs import task_token
from longstep.humans.escalations import error_message
from longstep.workflows import log

APPLIED = "applied"  # an answer a pass has acted on
TASK = "WorkflowStep"


def escalation_key(seq: int, branch: int | None) -> str:
    """The escalation record of the step at ``seq`` (``branch`` of a parallel call)."""
    return keys.escalation_key(seq, 0 if branch is None else branch)


def take_answer(store: StepStore, run_id: str, seq: int, branch: int | None) -> dict[str, Any] | None:
    """The human's answer to this step's escalation, once: None when there is none to act on."""
    before = store.update(run_id, escalation_key(seq, branch), {"status": APPLIED}, when=Condition(equal={"status": waiting.DECIDED}))
    return json.loads(before["decision"]) if before and before.get("decision") else None


def failed_position(store: StepStore, run_id: str) -> tuple[int, int | None, str | None]:
    """Where the run is stuck: an at-most-once step with an intent and no result, else the
    position after the last recorded call."""
    items = store.query_prefix(run_id, log.PREFIX)
    recorded = {i["sk"] for i in items if i["sk"].startswith(log.STEP_PREFIX) and not is_claim(i)}
    for item in items:
        if item["sk"].startswith(log.INTENT_PREFIX):
            parts = item["sk"][len(log.INTENT_PREFIX) :].split("#")
            seq, branch = int(parts[0]), (int(parts[1]) if len(parts) > 1 else None)
            if log.step_key(seq, branch) not in recorded:
                return seq, branch, item.get("step")
    last = max((log.parse_step_key(sk)[0] for sk in recorded), default=0)
    return last + 1, None, None


def escalate(rt: Runtime, event: Any) -> dict[str, Any]:
    """Park the run's failed step for a human (retry, skip with a result, or abort)."""
    token = task_token(event)
    state = event.get("state") if isinstance(event, dict) else None
    run_id, _, _ = log.start_fields(state)
    error = (state or {}).get("error") or {}
    seq, branch, step = failed_position(rt.store, run_id)
    attrs = {"task": TASK, "tool": step, "error": str(error.get("Error", "Unknown")), "reason": error_message(error.get("Cause"))}
    status = waiting.park(rt.store, run_id, escalation_key(seq, branch), token, {k: v for k, v in attrs.items() if v is not None})
    return {"run_id": run_id, "seq": seq, "branch": branch, "step": step, "error": attrs["error"], "status": status}
