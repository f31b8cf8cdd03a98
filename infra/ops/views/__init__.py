"""Read-only views of runs: where each run stands, the timeline of its steps, and what it cost.

Everything here is read from what a run leaves behind, never from a running Lambda:

- the executions of the run's state machine (a run's executions are its generations, named
  ``run_id`` then ``run_id--gN``: see ``longstep_kit.ops.runs``) and their histories;
- the run's records in the checkpoint table: recorded steps, and the records parked on a task
  token (``escalation#`` pending, ``signal#`` waiting);
- the run's pending requests in the approvals table (``longstep.humans.requests``).

A run's status is one of ``status.STATUSES``. A finished execution decides it (``succeeded``, or
``failed`` for FAILED, TIMED_OUT and ABORTED); a running one is ``escalated`` when a step waits for
a human's answer, ``waiting_for_approval`` when a tool call waits for a decision,
``waiting_for_event`` when a ``wait_for`` waits for a signal or a timer, else ``running``.

The cost estimate (``cost.estimate_cost``) multiplies counted usage by a price table; what is
counted and what is estimated is documented on ``usage.Usage`` and in ``docs/operations.md``.

Clients are injected (boto3 clients for Step Functions, DynamoDB and Lambda) or created on first
use with the default session.

- ``inspector``: ``RunInspector``, the entry point: runs, their states, a run's whole view.
- ``status``: the statuses, ``RunState`` (where a run stands) and ages (``parse_age``).
- ``running``: what a running run waits for, else its latest step.
- ``history``: executions and the Lambda invocations in their histories (``attempts_of``).
- ``records``: the run's checkpoint records as the views read them: sizes, keys, values.
- ``timeline``: a run's timeline: recorded steps and waits, in order.
- ``usage``: what a run used (transitions, invocations, request units, tokens).
- ``cost``: price tables and the cost estimate.
- ``tree``: a run and its subagent runs: the tree ``runs`` draws, what a parent parked on its
  children waits on, and the cost roll-up of ``show --cost``.
"""

from __future__ import annotations

from longstep.errors import LongstepError


class InspectError(LongstepError):
    """A view could not be built: no such run, a malformed age or price table."""
