"""A workflow step's function run under its effect class, with the tools' discipline (docs/design.md §3).

``read`` and ``keyed`` steps just run (a keyed one hands ``info.idempotency_key`` to the system
it writes to); ``check_then_act`` asks its check first; ``at_most_once`` writes an intent marker,
keyed by run and step, before acting: a marker with no recorded result means the step may have
acted and must not run again (``OutcomeUnknownError``; a human says what happened).
"""

from __future__ import annotations

import json
from typing import Any

from longstep import clock, faults, markers
from longstep.classify import classify_client_error
from longstep.errors import LongstepError, OutcomeUnknownError, TransientError
from longstep.store import StepStore
from longstep.tools.registry import Effect
from longstep.workflows import escalations, log
from longstep.workflows.context import Call, StepInfo


def run_effect(store: StepStore, run_id: str, seq: int, branch: int | None, call: Call, key: str, consult_answers: bool = False) -> dict[str, Any]:
    """Run ``call`` once and return the outcome to record: ``{"ok": value}`` or ``{"failed": ...}``.

    ``consult_answers``: the run comes back from an escalation; a human's ``skip`` of this step
    is its outcome (an at-most-once step consults the answer when it finds its intent).

    Raises:
        TransientError: the function (or an AWS call in it) failed in a way a retry may fix.
        OutcomeUnknownError: an at-most-once step was started before and never recorded.
    """
    info = StepInfo(run_id=run_id, seq=seq, branch=branch, idempotency_key=key, name=call.step_name)
    if consult_answers and call.effect is not Effect.AT_MOST_ONCE:
        answer = escalations.take_answer(store, run_id, seq, branch)
        if answer is not None and answer.get("action") == "skip":
            return {"ok": answer.get("result")}
    faults.reach(faults.BEFORE_TOOL, run_id, seq, branch)
    try:
        value = _apply(store, call, info)
        json.dumps(value)  # checked before recording: the effect has happened, its record must follow
    except (TransientError, OutcomeUnknownError):
        raise
    except Exception as exc:  # noqa: BLE001 - recorded: the workflow sees it as StepFailedError
        classified = _classified(exc)
        if isinstance(classified, TransientError):
            raise classified from exc
        return {"failed": {"type": type(exc).__name__, "message": str(exc)[:2000]}}
    faults.reach(faults.AFTER_EFFECT, run_id, seq, branch)
    return {"ok": value}


def _apply(store: StepStore, call: Call, info: StepInfo) -> Any:
    if call.effect is Effect.CHECK_THEN_ACT:
        assert call.check is not None
        done = call.check(call.args, info)
        if done is not None:
            return done
    elif call.effect is Effect.AT_MOST_ONCE:
        intent = {"step": info.name, "started_at": clock.now()}
        if not markers.put_own(store, info.run_id, log.intent_key(info.seq, info.branch), intent):
            answer = escalations.take_answer(store, info.run_id, info.seq, info.branch)
            if answer is not None and answer.get("action") == "skip":  # it happened: the human's result
                return answer.get("result")
            if answer is None or answer.get("happened") is not False:
                raise OutcomeUnknownError(
                    f"workflow step {info.name} (position {info.seq}) was started before and its result was never "
                    "recorded: it may have acted; a human must confirm the outcome"
                ) from None
            # A human confirmed it did not act: it may run once more, under a fresh intent.
            store.put(info.run_id, log.intent_key(info.seq, info.branch), intent)
    return call.fn(call.args, info)


def _classified(exc: Exception) -> Exception:
    """An AWS error inside the step as the runtime classifies it (throttling is transient)."""
    if isinstance(exc, LongstepError):
        return exc
    try:
        from botocore.exceptions import ClientError
    except ImportError:  # pragma: no cover - botocore ships with the Lambda runtime
        return exc
    return classify_client_error(exc, model=False) if isinstance(exc, ClientError) else exc
