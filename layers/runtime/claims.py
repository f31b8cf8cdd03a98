"""A step's claim: the step's own record is its lock while it runs, with a lease.

An attempt claims a step with one conditional write of the step's record, without a result: it
holds unless the step is recorded or another attempt's claim is still live. The attempt then
writes its result into that record, on the condition that the claim is still its own. A claim's
lease ends when its invocation would have timed out (``longstep.steps.RecordLease``), so a crashed
attempt's claim is taken over once its lease is over; an attempt that stalled past its lease (a
zombie) and then writes finds the record claimed or recorded by another attempt, and writes
nothing. So a step costs two requests when it runs (claim, result) and one when it is replayed
(the failed claim hands back the record), and no lock record is kept once the step is recorded.
"""

from __future__ import annotations

from typing import Any, Mapping

from longstep import clock, codec
from longstep.conditions import Condition

# A step under way: its record holds the claim of the attempt executing it (``longstep.steps``)
# until that attempt writes the result into it. A recorded step has its result (``result``, or
# ``result_z`` compressed: ``longstep.codec.encode_json``) in every schema version; a claim has
# ``attempt`` and ``lease_until`` (epoch seconds) instead.
RESULT_ATTRIBUTES = ("result", "result_z")
RECORDED_ATTRIBUTE = "recorded_at"
ATTEMPT_ATTRIBUTE = "attempt"
LEASE_ATTRIBUTE = "lease_until"


def is_claim(item: Mapping[str, Any]) -> bool:
    """Whether a record (plain values) is the claim of a step under way, not a recorded step."""
    return ATTEMPT_ATTRIBUTE in item and not any(name in item for name in RESULT_ATTRIBUTES)


class StepClaims:
    """The claim operations of a store (mixed into ``longstep.store.Records``), built on its
    ``put_if``, ``update`` and ``_item``."""

    def put_if(self, run_id: str, sk: str, attrs: Mapping[str, Any], when: Condition) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError

    def update(self, run_id: str, sk: str, values: Mapping[str, Any], **kwargs: Any) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError

    def _item(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def delete_if(self, run_id: str, sk: str, when: Condition) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _stored_result(self, run_id: str, sk: str, result: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _recorded(self, run_id: str, sk: str, result: Any, stored: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def claim_step(self, run_id: str, sk: str, kind: str, name: str, attempt: str, lease_until: float) -> dict[str, Any] | None:
        """Claim a step for ``attempt`` until ``lease_until``: one conditional write.

        The claim is the step's own record, without a result: it is written unless the step is
        recorded or another attempt's claim is still live (its lease not yet over), and a failed
        condition hands back the record that failed it, so a replay costs this one request.

        Returns:
            None when the claim was written; else the record found (a recorded step, or a live claim).
        """
        attrs = {"kind": kind, "name": name, ATTEMPT_ATTRIBUTE: attempt, LEASE_ATTRIBUTE: lease_until}
        return self.put_if(run_id, sk, attrs, Condition(absent=RESULT_ATTRIBUTES, below={LEASE_ATTRIBUTE: clock.now()}))

    def complete_step(self, run_id: str, sk: str, kind: str, name: str, result: Any, attempt: str) -> bool:
        """Write a step's result into the claim of ``attempt`` (compressed when that makes it
        smaller), ending the claim: one conditional update.

        Returns:
            False when the record is no longer this attempt's claim (its lease ran out and another
            attempt claimed or recorded the step): nothing was written.

        A repeated tool result is written as a reference to the record holding it (``longstep.outputs``).

        Raises:
            RecordTooLargeError: the record with its result would be over MAX_ITEM_BYTES.
        """
        stored = self._stored_result(run_id, sk, result)
        attrs = {**codec.encode_json("result", stored), RECORDED_ATTRIBUTE: clock.now()}
        self._item(run_id, sk, {"kind": kind, "name": name, **attrs})  # the size check a put makes
        done = self.update(run_id, sk, attrs, remove=(ATTEMPT_ATTRIBUTE, LEASE_ATTRIBUTE), when=Condition(equal={ATTEMPT_ATTRIBUTE: attempt}))
        if done is not None:
            self._recorded(run_id, sk, result, stored)
        return done is not None

    def release_step(self, run_id: str, sk: str, attempt: str) -> None:
        """Remove the claim of ``attempt`` (its step failed and recorded nothing): the retry claims
        the step at once instead of waiting for the lease, and nothing of the attempt is kept."""
        self.delete_if(run_id, sk, Condition(equal={ATTEMPT_ATTRIBUTE: attempt}))
