"""Steering a live run: messages from the user, pause and resume, stop and interrupt.

Each is a durable input the run takes at its next step boundary, never a change under a running
step, so a replay stays exact:

- A message is a record of the run's inbox (``message#<n>``, numbered without gaps, as the event
  stream is). The next model turn takes the messages it has not taken yet *inside* its model step:
  they are recorded with the reply (``steering`` in the step's record), so a replay rebuilds the
  same transcript, and a turn whose reply is recorded never takes new ones.
- Pause, stop and interrupt are fields of the run record, which every task reads anyway: no
  request is added to a turn. A paused run parks on a task token at the next model turn (the
  ``Pause`` state: no compute, no transitions while paused); resume hands that token back. A stop
  ends the run at the next model turn (status stopped); a tool call asked for and not yet run is
  recorded as cancelled. An interrupt cancels the current turn's calls not yet run, so the model
  takes the new input at once.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from longstep import clock, keys
from longstep.contract.run import INBOX_COUNT, INBOX_TAKEN, INTERRUPT, PAUSE_TOKEN, PAUSED, STOP, RunRecord
from longstep.errors import InvalidInputError
from longstep.humans.signals import dead_token
from longstep.messages import Message
from longstep.store import AlreadyRecordedError, Condition, StepStore

# What the model sees of a message (a text block of the user message before its reply).
MESSAGE_PREFIX = "Message from the user: "
# A message is text for the model's context: bounded like a tool result kept inline.
MAX_MESSAGE_CHARS = 16 * 1024
_TRIES = 25


def send(store: StepStore, run_id: str, text: str, sender: str = "unknown") -> int:
    """Queue ``text`` for the run's next model turn; returns its place in the inbox (0, 1, ...).

    Raises:
        InvalidInputError: the text is empty or too long, or the run does not exist.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("message: the message is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidInputError(f"message: {len(text)} characters; at most {MAX_MESSAGE_CHARS}")
    for _ in range(_TRIES):
        run = _run(store, run_id)
        n = run.steering.inbox_count
        try:
            store.put_once(run_id, keys.message_key(n), {"text": text, "sender": sender, "at": clock.now()})
        except AlreadyRecordedError:  # another sender took this place (and may not have counted it yet)
            _count(store, run_id, n + 1)
            continue
        _count(store, run_id, n + 1)
        return n
    raise InvalidInputError(f"run_id: too many messages sent to {run_id!r} at once; try again")


def _count(store: StepStore, run_id: str, count: int) -> None:
    store.update(run_id, keys.RUN_RECORD, {INBOX_COUNT: count}, when=Condition(exists=True, below={INBOX_COUNT: count}))


def _run(store: StepStore, run_id: str) -> RunRecord:
    item = store.get(run_id, keys.RUN_RECORD)
    if item is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    return RunRecord.from_dict(item)


def pending(store: StepStore, run_id: str, run: RunRecord | Mapping[str, Any]) -> tuple[list[str], int]:
    """The messages the run has not taken yet, and the inbox count they go up to."""
    fields = RunRecord.of(run).steering
    count, taken = fields.inbox_count, fields.inbox_taken
    if count <= taken:
        return [], taken
    records = store.query_between(run_id, keys.message_key(taken), keys.message_key(count - 1))
    return [str(r["text"]) for r in records], taken + len(records)


def taken(store: StepStore, run_id: str, upto: int) -> None:
    """Mark the inbox taken up to ``upto`` (after the model step that took them was recorded)."""
    store.update(run_id, keys.RUN_RECORD, {INBOX_TAKEN: upto}, remove=(INTERRUPT,), when=Condition(exists=True, below={INBOX_TAKEN: upto}))


def blocks(texts: list[str]) -> list[dict[str, str]]:
    """The text blocks the model is given for the messages ``texts``."""
    return [{"text": MESSAGE_PREFIX + text} for text in texts]


def add_to_user_turn(messages: list[Message], texts: list[str]) -> list[Message]:
    """``messages`` with ``texts`` added to the user message they end with (or in a new one).

    Converse wants user and assistant messages in turn, so a message joins the user message (the
    goal, the tool results, the feedback) that precedes the reply it is for.
    """
    if not texts:
        return messages
    out = list(messages)
    if out and out[-1].get("role") == "user":
        out[-1] = {**out[-1], "content": [*out[-1]["content"], *blocks(texts)]}
    else:
        out.append({"role": "user", "content": blocks(texts)})
    return out


def pause(store: StepStore, run_id: str) -> bool:
    """Ask the run to pause at its next model turn; False when it was paused already."""
    before = store.update(run_id, keys.RUN_RECORD, {PAUSED: True}, when=Condition(exists=True))
    if before is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    return not RunRecord.from_dict(before).steering.paused


def park(store: StepStore, sfn: Any, run_id: str, token: str) -> str:
    """The Pause task: keep the token on the run record, or hand it back if resumed meanwhile."""
    if store.update(run_id, keys.RUN_RECORD, {PAUSE_TOKEN: token}, when=Condition(exists=True, equal={PAUSED: True})) is None:
        sfn.send_task_success(taskToken=token, output=json.dumps({"resumed": True}))
        return "resumed"
    return "paused"


def unpause(store: StepStore, sfn: Any, run_id: str) -> bool:
    """Clear the pause and hand back the parked token; False when the run was not paused."""
    before = store.update(run_id, keys.RUN_RECORD, {PAUSED: False}, remove=(PAUSE_TOKEN,), when=Condition(exists=True))
    if before is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    was = RunRecord.from_dict(before).steering
    if was.pause_token:
        _hand_back(sfn, was.pause_token)
    return was.paused


def stop(store: StepStore, run_id: str, reason: str) -> bool:
    """Ask the run to stop at its next step boundary; False when a stop was asked before."""
    request = json.dumps({"reason": reason, "at": clock.now()})
    before = store.update(run_id, keys.RUN_RECORD, {STOP: request}, when=Condition(exists=True))
    if before is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    return RunRecord.from_dict(before).steering.stop_reason is None


def interrupt(store: StepStore, run_id: str) -> None:
    """Cancel the current turn's calls not yet run: the next model turn takes the inbox at once."""
    if store.update(run_id, keys.RUN_RECORD, {INTERRUPT: True}, when=Condition(exists=True)) is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")


def clear_stop(store: StepStore, run_id: str) -> None:
    """Forget a stop (a stopped run resumed goes on from where it stopped)."""
    store.update(run_id, keys.RUN_RECORD, {}, remove=(STOP, INTERRUPT, PAUSED, PAUSE_TOKEN), when=Condition(exists=True))


def stop_reason(run: RunRecord | Mapping[str, Any]) -> str | None:
    """The reason of the stop the run record asks for, or None."""
    return RunRecord.of(run).steering.stop_reason


def cancelled(run: RunRecord | Mapping[str, Any]) -> str | None:
    """Why a tool call not yet run must not run now (a stop or an interrupt), or None."""
    fields = RunRecord.of(run).steering
    if fields.stop_reason is not None:
        return f"cancelled: the run was stopped ({fields.stop_reason}); the call did not run"
    if fields.interrupted:
        return "cancelled: the user interrupted the turn with a new message; the call did not run"
    return None


def _hand_back(sfn: Any, token: str) -> None:
    try:
        sfn.send_task_success(taskToken=token, output=json.dumps({"resumed": True}))
    except Exception as exc:  # noqa: BLE001 - a token nobody waits on any more (the execution ended)
        if not dead_token(exc):
            raise
