"""The message history, rebuilt from the recorded steps: the transcript a run's hash is taken
of, and the turns a model call is given.

A turn's "slot" is ``{"model": <recorded reply>, "tools": {call index: <recorded result>}}``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from longstep import keys, policy
from longstep.contract.run import RunRecord
from longstep.errors import StepRecordLostError
from longstep.messages import Message, tool_result_block, tool_uses, user_text
from longstep.steering import add_to_user_turn
from longstep.store import StepRecord

Slots = dict[int, dict[str, Any]]


def by_turn(steps: list[StepRecord]) -> Slots:
    """Recorded steps grouped into per-turn slots."""
    turns: Slots = {}
    for step in steps:
        key = keys.parse(step.sk)
        slot = turns.setdefault(key.turn, {"model": None, "tools": {}})
        if step.kind == "model":
            slot["model"] = step.result
        else:
            slot["tools"][key.call] = step.result
    return turns


def feedback(record: dict[str, Any]) -> str | None:
    """The user message that follows a reply that needed correcting (empty, or rejected)."""
    if record.get("correction"):
        return record["correction"]
    verdict = record.get("verdict")
    if verdict and not verdict["ok"]:
        return policy.VERIFIER_PREFIX + verdict["feedback"]
    return None


def render_turns(turns: Slots, start: int, end: int | None, prefix: Sequence[Message] = ()) -> list[Message]:
    """``prefix`` and the messages of turns ``start`` to ``end`` (exclusive; None: all that are recorded).

    The messages a user sent while the run worked (``longstep.steering``) are recorded with the
    reply they came before, and join the user message that precedes it (``prefix``'s last one for
    the first turn).

    Raises:
        StepRecordLostError: a turn before ``end`` lacks its reply or one of its tool results: a
            record the run wrote is missing (expired or removed), which is not a divergence of
            the code (``NonDeterminismError``) and is reported as what it is.
    """
    messages: list[Message] = list(prefix)
    for turn in sorted(t for t in turns if t >= start and (end is None or t < end)):
        slot = turns[turn]
        if slot["model"] is None:
            raise StepRecordLostError(f"turn {turn} has tool results but its model reply is missing (expired or removed)")
        messages = add_to_user_turn(messages, slot["model"].get("steering") or [])
        reply = slot["model"]["message"]
        # Converse refuses an assistant message without content: keep its place with a marker.
        messages.append(reply if reply.get("content") else {**reply, "content": [{"text": "(empty reply)"}]})
        note = feedback(slot["model"])
        if note:
            messages.append(user_text(note))
        blocks = []
        for index, use in enumerate(tool_uses(reply)):
            result = slot["tools"].get(index)
            if result is None:
                if end is None:  # the whole log: a turn still running ends the history
                    break
                raise StepRecordLostError(f"turn {turn} call {index}: its recorded result is missing (expired or removed)")
            blocks.append(tool_result_block(use["toolUseId"], result["content"], is_error=result["status"] == "error"))
        if blocks:
            messages.append({"role": "user", "content": blocks})
    return messages


def transcript(run: RunRecord | Mapping[str, Any], steps: list[StepRecord], upto_turn: int | None = None) -> list[Message]:
    """The full message history: the goal and every recorded turn (before ``upto_turn``)."""
    return render_turns(by_turn(steps), 0, upto_turn, [user_text(RunRecord.of(run).goal)])


def correction_kinds(turns: Slots | list[StepRecord], upto_turn: int) -> list[str | None]:
    """For each turn before ``upto_turn``: ``model``, ``semantic`` or None (see ``policy``)."""
    slots = by_turn(turns) if isinstance(turns, list) else turns
    out: list[str | None] = []
    for turn in range(min(slots, default=0), upto_turn):
        slot = slots.get(turn)
        if not slot or not slot["model"]:
            out.append(None)
            continue
        out.append(policy.correction_kind(slot["model"], [slot["tools"][i] for i in sorted(slot["tools"])]))
    return out


def injected_turns(turns: Slots, upto_turn: int) -> int:
    """Turns before ``upto_turn`` whose reply or verdict a fault replaced (the script skips them)."""
    return sum(1 for turn, slot in turns.items() if turn < upto_turn and slot["model"] and "injected" in slot["model"])


def completed_turns(steps: list[StepRecord], first: int = 0) -> int:
    """How many turns from ``first`` on have a model reply with tools and every tool result recorded."""
    turns = by_turn(steps)
    done = first
    while done in turns:
        slot = turns[done]
        uses = tool_uses(slot["model"]["message"]) if slot["model"] else []
        if not uses or len(slot["tools"]) < len(uses):
            break
        done += 1
    return done - first
