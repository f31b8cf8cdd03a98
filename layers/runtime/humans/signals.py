"""Signals for ``wait_for`` event waits: kept in order, each delivered once, none lost to a race.

Per (run, event name), the checkpoint table holds:

- the head record ``signal#<event>``: the parked waiters, one attribute each (``waiter_<hash of
  its token>``: its token and ``match``; parallel calls of one turn may wait on one event), and
  ``seq``, the count of signals ever sent for the event;
- one entry per signal, ``signal#<event>#<seq>``, ``buffered`` until a wait takes it, then
  ``consumed`` (``withdrawn``: its sender was told it failed). Entries sort in the order they
  were sent.

A signal first writes its entry (a put-once on the next free place), then raises ``seq``; the
update returns the head as it was, so a signal that finds a waiter parked hands it the oldest
buffered entry its ``match`` accepts. A waiter parks only if ``seq`` has not moved since it read
the queue (a conditional update): a signal sent in between makes the park fail and the waiter
reads the queue again. Whichever side comes second finds the other, and a signal that matches
no wait stays buffered for the next matching one (it was dropped before issue 24, and a second
signal replaced a first).

An entry is handed over in two writes: it is first claimed for one waiter (``handing``, with
that waiter's slot and the time), then ``SendTaskSuccess`` answers the waiter, then the entry is
marked consumed. Only ``buffered`` entries are offered to a wait, so while one hand-over is in
flight no parallel wait on the event (nor a concurrent sender's hand-over) can take the same
entry: before the claim, a signal answered to one wait and not yet marked was still buffered, and
a second parallel wait, parking or handed over by another sender after its first waiter's token
was found closed, got it too. A failed call puts the entry back to ``buffered``. A claim left by a
hander that died is offered again once ``HAND_LEASE_SECONDS`` have passed (and at once to the
waiter it was claimed for, whose retried park takes it). A token whose wait already timed out is dead (Step Functions answers ``TaskTimedOut``,
``InvalidToken`` or ``TaskDoesNotExist``:
https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html); the
head is then cleared and the signal stays buffered. A crash after ``SendTaskSuccess`` succeeded
and before the entry is marked (or a lost response, whose retry hears ``TaskTimedOut``) leaves it
buffered: the answer carries the entry's key and its waiter, and the call that receives it marks
it consumed by that waiter (:func:`received`) before the run can wait on the event again. If a
second parallel wait got the entry meanwhile, the call that marks it second parks again.

``send`` is what the CLI, the approval API and the EventBridge target call: it refuses a payload
too large to deliver, a run that does not exist (unless asked to buffer for a run that starts
later) or has finished, and an event the run's agent does not declare (``Agent.events``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Mapping

from longstep import clock, keys
from longstep.errors import BadRequestError, SignalRefusedError, UnknownAgentError
from longstep.store import FLOOR_ATTRIBUTE, AlreadyRecordedError, Condition, StepStore
from longstep.contract.call import Signal
from longstep.contract.run import RunRecord

# Head statuses (``signaled``: a signal buffered in the head by a version before the queue) and,
# ``buffered`` and ``consumed``, an entry's.
WAITING, SIGNALED, CONSUMED, ENDED = "waiting", "signaled", "consumed", "ended"
WAITER_PREFIX = "waiter_"  # a head's attribute per parked waiter (``_slot``)
BUFFERED_ENTRY, WITHDRAWN, HANDING = "buffered", "withdrawn", "handing"
# How long a claim (``handing``) keeps an entry from other waits: a hand-over takes two writes and
# one call, so a claim this old was left by a hander that died.
HAND_LEASE_SECONDS = 300
DELIVERED, BUFFERED = "delivered", "buffered"
# Step Functions' answers for a token nobody waits on any more.
DEAD_TOKEN_ERRORS = ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist")
# SendTaskSuccess takes an output of at most 262,144 bytes (UTF-8)
# (https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html), and
# that output becomes part of the call's state, which has the same limit; a DynamoDB item holds
# 400 KB (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html).
# The smaller, less room for the envelope and the call item the state carries with it.
MAX_SIGNAL_BYTES = 256 * 1024 - 8 * 1024
_ATTEMPTS = 5  # each attempt reacts to a concurrent change of the records


class SignalRecordBusyError(RuntimeError):
    """The signal records kept changing under concurrent writers; nothing was lost, try again."""


def signal_key(event: str) -> str:
    """Sort key of the head record of ``event``."""
    return keys.signal_key(event)


def matches(payload: Any, match: dict[str, Any]) -> bool:
    """Whether ``payload`` holds every key/value of ``match``."""
    return isinstance(payload, dict) and all(payload.get(k) == v for k, v in match.items())


def dead_token(exc: BaseException) -> bool:
    """Whether ``exc`` is Step Functions saying the token's task is over (timed out or gone)."""
    code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
    return code in DEAD_TOKEN_ERRORS


def encoded_payload(payload: Any, field: str = "payload") -> str:
    """The payload as the JSON its entry keeps.

    Raises:
        BadRequestError: it is larger than a signal can be (``MAX_SIGNAL_BYTES``).
    """
    body = json.dumps(payload)
    size = len(body.encode("utf-8"))
    if size > MAX_SIGNAL_BYTES:
        raise BadRequestError(field, f"is {size} bytes of JSON, over the {MAX_SIGNAL_BYTES} a signal may carry (SendTaskSuccess takes 256 KB)")
    return body


def _buffered(store: StepStore, run_id: str, event: str, slot: str | None = None) -> list[dict[str, Any]]:
    """The entries a wait may take, oldest first: the buffered ones, the ones whose claim was left
    past its lease, and (``slot``) the ones claimed for this very waiter by an attempt that died."""
    stale = clock.now() - HAND_LEASE_SECONDS

    def free(r: dict[str, Any]) -> bool:
        if r.get("status") == BUFFERED_ENTRY:
            return True
        return r.get("status") == HANDING and (r.get("handing_to") == slot or float(r.get("handing_at") or 0) < stale)

    return [r for r in store.query_prefix(run_id, signal_key(event) + "#") if free(r)]


def _first_match(entries: list[dict[str, Any]], match: dict[str, Any]) -> dict[str, Any] | None:
    return next((e for e in entries if matches(json.loads(e["payload"]), match)), None)


def _claim(store: StepStore, run_id: str, entry: dict[str, Any], token: str) -> dict[str, Any] | None:
    """Claim ``entry`` for the waiter of ``token`` before answering it; the claim (None: another
    wait took the entry first)."""
    if entry.get("status") == HANDING:  # a claim left behind: taken over as it was read
        when = Condition(equal={"status": HANDING, "handing_at": entry["handing_at"]})
    else:
        when = Condition(equal={"status": BUFFERED_ENTRY})
    claim = {"status": HANDING, "handing_to": _slot(token), "handing_at": clock.now()}
    return claim if store.update(run_id, entry["sk"], claim, when=when) is not None else None


def _settle(store: StepStore, run_id: str, entry: dict[str, Any], claim: dict[str, Any], consumed: bool) -> None:
    """End a hand-over: the entry is consumed (its waiter was answered) or buffered again."""
    done = {"status": CONSUMED, "consumed_at": clock.now(), "consumed_by": claim["handing_to"]} if consumed else {"status": BUFFERED_ENTRY}
    mine = Condition(equal={"status": HANDING, "handing_to": claim["handing_to"], "handing_at": claim["handing_at"]})
    store.update(run_id, entry["sk"], done, remove=("handing_to", "handing_at"), when=mine)


def _output(entry: dict[str, Any], claim: dict[str, Any]) -> str:
    """What a wait is answered with: the payload, the entry's key and the waiter it was claimed
    for (``received``)."""
    return json.dumps({"payload": json.loads(entry["payload"]), "entry": entry["sk"], "to": claim["handing_to"]})


def received(store: StepStore, run_id: str, signal: Signal | Mapping[str, Any] | None) -> bool:
    """The call that took a signal marks its entry consumed by its wait (if its sender could not);
    False when another wait of the run consumed it first.

    The sender marks an entry consumed after ``SendTaskSuccess`` succeeded; a sender that crashed
    in between left it buffered, and a later wait on the event would get it again. The call that
    receives it runs before the run can wait on the event again. A sender whose answer's response
    was lost hears ``TaskTimedOut`` on the SDK's retry and cannot tell that from a wait that timed
    out, so it puts the entry back and may hand it to a second wait parked on the event: the two
    calls that received it race here, each for its own waiter (``to``), and the one that comes
    second is told False (its wait parks again: ``SignalTakenError``). An answer from a version
    before waiters were named (no ``to``) is marked as before.
    """
    taken = signal if isinstance(signal, Signal) else Signal.model_validate(signal or {})
    sk, to = taken.entry, taken.to
    if not (isinstance(sk, str) and sk.startswith(keys.SIGNAL_PREFIX)):
        return True
    done = {"status": CONSUMED, "consumed_at": clock.now()}
    if not isinstance(to, str):
        store.update(run_id, sk, done, when=Condition(exists=True, not_equal={"status": CONSUMED}))
        return True
    ours = Condition(
        exists=True,
        # Not consumed yet, consumed by a version that named no waiter, or by this very wait.
        any_of=(Condition(not_equal={"status": CONSUMED}), Condition(absent=("consumed_by",)), Condition(equal={"consumed_by": to})),
    )
    return store.update(run_id, sk, {**done, "consumed_by": to}, when=ours) is not None


def register_waiter(store: StepStore, sfn: Any, run_id: str, event: str, match: dict[str, Any], token: str) -> str:
    """Park a ``wait_for`` on ``event``, or hand it the oldest buffered signal its ``match`` takes.

    Returns:
        ``waiting``, or ``consumed`` when a buffered signal was handed over at once.
    """
    sk = signal_key(event)
    for _ in range(_ATTEMPTS):
        head = store.get(run_id, sk) or {}
        if head.get("status") == SIGNALED and _take_legacy(store, sfn, run_id, sk, head, match, token):
            return CONSUMED
        entry = _first_match(_buffered(store, run_id, event, _slot(token)), match)
        if entry is not None:
            claim = _claim(store, run_id, entry, token)
            if claim is None:  # another wait claimed it first: read the queue again
                continue
            try:
                sfn.send_task_success(taskToken=token, output=_output(entry, claim))
            except Exception as exc:  # noqa: BLE001 - sorted by Step Functions' error code
                # Our own token, closed: an earlier attempt's answer took effect (its response
                # was lost) or the execution stopped. The entry stays claimed for this wait; the
                # call that receives it marks it consumed (``received``), and a stopped one's
                # claim lapses after the lease.
                if not dead_token(exc):
                    _settle(store, run_id, entry, claim, consumed=False)
                    raise
                return CONSUMED
            _settle(store, run_id, entry, claim, consumed=True)
            return CONSUMED
        seen = int(head.get("seq") or 0)
        parked = store.update(
            run_id,
            sk,
            {"status": WAITING, _slot(token): json.dumps({"token": token, "match": match}), "requested_at": clock.now()},
            when=Condition(below={"seq": seen + 1}),  # no signal was sent since the queue was read
            expires=True,
        )
        if parked is not None:
            return WAITING
    raise SignalRecordBusyError(f"signal record {run_id}/{sk} kept changing; try again")


def _take_legacy(store: StepStore, sfn: Any, run_id: str, sk: str, head: dict[str, Any], match: dict[str, Any], token: str) -> bool:
    """A signal buffered in the head record by a version before the queue: taken like an entry."""
    payload = json.loads(head["payload"])
    if not matches(payload, match):
        return False
    sfn.send_task_success(taskToken=token, output=json.dumps({"payload": payload}))
    store.update(run_id, sk, {"status": CONSUMED, "consumed_at": clock.now()}, remove=("payload",), when=Condition(equal={"status": SIGNALED}))
    return True


def deliver(store: StepStore, sfn: Any, run_id: str, event: str, payload: Any) -> str:
    """Send a signal: keep it in the event's queue, and hand the parked waiter (if any) the oldest
    buffered signal it matches.

    Returns:
        ``delivered`` (this signal went to the waiting ``wait_for``) or ``buffered`` (kept, in
        order, for the next wait that matches it).

    Raises:
        BadRequestError: the payload is too large (``MAX_SIGNAL_BYTES``).
        botocore's ClientError: ``SendTaskSuccess`` failed for another reason (throttling,
            access): nothing was consumed and this signal was withdrawn; send it again.
    """
    body = encoded_payload(payload)
    sk = signal_key(event)
    head = store.get(run_id, sk) or {}
    seq = int(head.get("seq") or 0)
    for _ in range(_ATTEMPTS * 4):  # a place taken by a concurrent signal: the next one
        try:
            store.put_once(run_id, keys.signal_entry_key(event, seq), {"status": BUFFERED_ENTRY, "payload": body, "signaled_at": clock.now()})
            break
        except AlreadyRecordedError:
            seq += 1
    else:
        raise SignalRecordBusyError(f"signal record {run_id}/{sk} kept changing; try again")
    mine = keys.signal_entry_key(event, seq)
    before = store.update(run_id, sk, {"seq": seq + 1, "signaled_at": clock.now()}, when=Condition(below={"seq": seq + 1}), expires=True)
    if before is None:  # a later signal raised ``seq`` past ours first: it found any waiter
        return _delivered_to_waiter(store, sfn, run_id, event, mine)
    if not waiters(before):
        return BUFFERED
    return _to_waiter(store, sfn, run_id, event, before, mine)


def _delivered_to_waiter(store: StepStore, sfn: Any, run_id: str, event: str, mine: str) -> str:
    head = store.get(run_id, signal_key(event)) or {}
    if waiters(head):
        return _to_waiter(store, sfn, run_id, event, head, mine)
    entry = store.get(run_id, mine) or {}
    return DELIVERED if entry.get("status") == CONSUMED else BUFFERED


def _to_waiter(store: StepStore, sfn: Any, run_id: str, event: str, head: dict[str, Any], mine: str) -> str:
    """Hand the parked waiters their signals; ``delivered`` when this one (``mine``) went to one.

    When ``SendTaskSuccess`` fails for another reason than a dead token, this signal's entry is
    withdrawn before the error goes to the sender: the sender's retry (EventBridge's, the CLI
    user's) sends it again, and a retried signal is never kept twice.
    """
    try:
        handed = _hand_over(store, sfn, run_id, event, head)
    except Exception:
        store.update(run_id, mine, {"status": WITHDRAWN}, when=Condition(equal={"status": BUFFERED_ENTRY}))
        raise
    return DELIVERED if mine in handed else BUFFERED


def _slot(token: str) -> str:
    """The head's attribute that holds the waiter of ``token``: one per waiter, so parallel waits
    on one event (a turn's calls run side by side) each keep theirs."""
    return WAITER_PREFIX + hashlib.sha256(token.encode()).hexdigest()[:16]


def waiters(head: dict[str, Any]) -> list[tuple[str | None, str, dict[str, Any]]]:
    """The waiters parked on ``head``: (slot, task token, match). A head parked before slots
    holds its one waiter in ``task_token`` and ``match`` (slot None)."""
    found: list[tuple[str | None, str, dict[str, Any]]] = []
    if head.get("status") == WAITING and head.get("task_token"):
        found.append((None, head["task_token"], json.loads(head.get("match") or "{}")))
    for name in sorted(n for n in head if n.startswith(WAITER_PREFIX)):
        waiter = json.loads(head[name])
        found.append((name, waiter["token"], waiter.get("match") or {}))
    return found


def _hand_over(store: StepStore, sfn: Any, run_id: str, event: str, head: dict[str, Any]) -> list[str]:
    """Give each parked waiter of ``head`` the oldest buffered signal it matches.

    Returns:
        The sort keys of the entries handed over (none: nothing matches, or the waits are over).
    """
    sk = signal_key(event)
    entries, handed, tried = _buffered(store, run_id, event), [], set()
    for slot, token, match in waiters(head):
        entry, claim = None, None
        while claim is None:  # the oldest match this hand-over can claim (a parallel one may take some)
            entry = _first_match([e for e in entries if e["sk"] not in tried], match)
            if entry is None:
                break
            tried.add(entry["sk"])
            claim = _claim(store, run_id, entry, token)
        if entry is None or claim is None:
            continue
        # This waiter, as it was parked (a concurrent hand-over may have taken it since).
        still = Condition(equal={slot: head[slot]}) if slot else Condition(equal={"status": WAITING, "task_token": token})
        try:
            sfn.send_task_success(taskToken=token, output=_output(entry, claim))
        except Exception as exc:  # noqa: BLE001 - sorted by Step Functions' error code
            _settle(store, run_id, entry, claim, consumed=False)
            tried.discard(entry["sk"])  # buffered again: the next waiter may take it
            if not dead_token(exc):
                raise
            # The wait is over (timed out, or another signal got there first): the entry stays buffered.
            store.update(run_id, sk, {"status": ENDED}, remove=(slot,) if slot else ("task_token", "match"), when=still)
            continue
        _settle(store, run_id, entry, claim, consumed=True)
        store.update(run_id, sk, {"status": CONSUMED, "consumed_at": clock.now()}, remove=(slot,) if slot else ("task_token",), when=still)
        handed.append(str(entry["sk"]))
    return handed


def send(
    store: StepStore, sfn: Any, run_id: str, event: str, payload: Any, resolve_agent: Callable[[str], Any] | None, *, buffer: bool = False
) -> str:
    """A signal from outside (the CLI, the approval API, EventBridge): checked, then ``deliver``-ed.

    Args:
        resolve_agent: finds the run's agent, for the events it declares (None: not checked).
        buffer: keep a signal for a run that does not exist yet (it may start later).

    Raises:
        BadRequestError: the payload is too large.
        SignalRefusedError: no such run (unless ``buffer``), the run has finished, or its agent
            declares the events it waits on and ``event`` is not one.
    """
    encoded_payload(payload)  # refused before anything is read or written
    stored = store.get(run_id, keys.RUN_RECORD)
    run = None if stored is None else RunRecord.from_dict(stored)
    workflow = None if run is not None else store.get(run_id, WORKFLOW_RUN)
    if run is None and workflow is None:
        if not buffer:
            raise SignalRefusedError("run_id", f"no run {run_id!r}", 404)
        return deliver(store, sfn, run_id, event, payload)
    if store.get(run_id, keys.FINAL_RECORD if run is not None else WORKFLOW_FINAL) is not None:
        raise SignalRefusedError("run_id", f"run {run_id!r} has finished: nothing will wait for {event!r} again", 409)
    if run is not None and resolve_agent is not None:
        declared = _declared_events(resolve_agent, run.agent)
        if declared is not None and event not in declared:
            shown = ", ".join(declared) or "none"
            raise SignalRefusedError("event", f"run {run_id!r} never waits on {event!r} (its agent {run.agent!r} waits on: {shown})", 422)
    # A signal kept during a long wait lives as long as the run's other records.
    store.hold(run_id, run.outputs.kept_until if run is not None else (workflow or {}).get(FLOOR_ATTRIBUTE))
    return deliver(store, sfn, run_id, event, payload)


# A workflow run's records (``longstep.workflows.log``: RUN, FINAL), named here to keep humans/
# free of an import of workflows/ (which imports this module).
WORKFLOW_RUN, WORKFLOW_FINAL = "wf#run", "wf#final"


def _declared_events(resolve_agent: Callable[[str], Any], agent: Any) -> tuple[str, ...] | None:
    try:
        return getattr(resolve_agent(str(agent)), "events", None)
    except UnknownAgentError:  # an agent no longer deployed: its runs cannot be checked
        return None
