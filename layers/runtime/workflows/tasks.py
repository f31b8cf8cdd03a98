"""The workflow function's two tasks (``longstep_functions.workflow``).

``advance``: one pass of the workflow over its log; returns the directive the state machine
routes on. ``park``: the task-token half of a wait (an approval request in the approvals
table, or a waiter for a signal), holding no compute until a human or a signal answers.

The state machine's state (and so each event) is small: ``run_id``, ``workflow``, ``input``,
the last ``directive`` and, after a wait, ``resumed`` (its outcome). Results live in the log.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from longstep import clock, codec, environment, executions, pinning
from longstep.errors import InvalidInputError, RunConflictError
from longstep.humans import requests, signals
from longstep.humans.notifications import publisher
from longstep.runtime import Runtime
from longstep.claims import is_claim
from longstep.store import AlreadyRecordedError, step_record
from longstep.inputs import task_token
from longstep.workflows import children, escalations, log
from longstep.workflows.definition import DEFAULT_PASSES_PER_EXECUTION, ENV_PASSES_PER_EXECUTION, Workflow
from longstep.workflows.replay import MAX_INLINE_OUTPUT_BYTES, Defaults, Replay, Resume, run_pass

WorkflowResolver = Callable[[str], Workflow]
# The directive a resumed wait came from -> the kind recorded for its outcome.
_RESUMES = {log.APPROVE: log.APPROVAL, log.SIGNAL: log.EVENT, log.DELEGATE: log.AGENT}


def advance(rt: Runtime, event: Any, resolve: WorkflowResolver) -> dict[str, Any]:
    """Replay the run's workflow to its next step, wait or end; the directive for the state machine."""
    run_id, name, workflow_input = log.start_fields(event)
    workflow = resolve(name)
    items = rt.store.query_prefix(run_id, log.PREFIX)
    by_key = {item["sk"]: item for item in items}
    final = by_key.get(log.FINAL)
    if final is not None:  # ended before: a re-invocation answers the same
        return _ended(step_record(final).name, step_record(final).result)
    workflow_input = _attach(rt, run_id, name, workflow_input, by_key.get(log.RUN))
    resume = _resume(event)
    if resume is not None and resume.kind == log.APPROVAL:
        _decision_reached(rt, run_id, resume)
    engine = Replay(
        rt.store,
        rt.lock,
        run_id,
        [step_record(item) for item in items if item["sk"].startswith(log.STEP_PREFIX) and not is_claim(item)],
        resume=resume,
        # Only a run that came back from an escalation may hold an answer to act on.
        consult_answers="resolution" in event,
        defaults=Defaults(approval_timeout_seconds=rt.settings.approvals.timeout_seconds),
    )
    directive = run_pass(workflow.fn, workflow_input, engine)
    passes = _passes(event) + 1
    if directive["next"] in (log.DONE, log.FAILED):
        outcome = directive.get("output") if directive["next"] == log.DONE else {"error": directive["error"], "cause": directive["cause"]}
        try:
            rt.store.record_step(run_id, log.FINAL, "final", directive["next"], outcome)
        except AlreadyRecordedError:  # a concurrent duplicate ended it first: its ending stands
            record = rt.store.get_step(run_id, log.FINAL)
            assert record is not None
            return _ended(record.name, record.result)
        return {**_ended(directive["next"], outcome), "steps_executed": engine.executed}
    if passes > _passes_per_execution(event):
        # Before the history nears 25,000 events. The pass has recorded its work (the outcome of
        # the wait it resumed from included); the next execution's first pass replays it and
        # asks for the same next step or wait, so nothing is lost. Each execution makes at
        # least ``passes_per_execution`` passes of progress before it hands over.
        directive = {"next": log.CONTINUE_AS_NEW}
    return {**directive, "steps_executed": engine.executed, "passes": passes}


def hand_over(rt: Runtime, event: Any) -> dict[str, Any]:
    """Start the run's next execution (generation + 1); it replays the log from the top.

    The execution name is deterministic (``<run_id>--g<generation>``): a retried invocation
    starts nothing new.
    """
    state = event.get("state") if isinstance(event, dict) else None
    run_id, name, workflow_input = log.start_fields(state)
    if not isinstance(event.get("state_machine_arn"), str) or not isinstance(event.get("execution_name"), str):
        raise InvalidInputError("state_machine_arn, execution_name: the current execution's are required")
    generation = int(state.get("generation") or 0) + 1
    payload = {"run_id": run_id, "workflow": name, "input": workflow_input, "generation": generation}
    for carried in ("passes_per_execution", "model"):  # the start's options hold for the whole run
        if state.get(carried):
            payload[carried] = state[carried]
    execution = executions.generation_name(executions.first_name(event["execution_name"]), generation)
    sfn = rt.step_functions()
    # On the version this execution runs: the run keeps the code it started with (pinning).
    version = pinning.running_version(sfn, event["state_machine_arn"], event["execution_name"])
    try:
        arn = sfn.start_execution(stateMachineArn=version, name=execution, input=json.dumps(payload))["executionArn"]
    except sfn.exceptions.ExecutionAlreadyExists:  # started by an earlier attempt of this task
        arn = executions.execution_arn(pinning.unqualified(event["state_machine_arn"]), execution)
    return {"run_id": run_id, "continued_as": arn, "generation": generation}


def _passes(event: dict[str, Any]) -> int:
    directive = event.get("directive")
    return int(directive.get("passes") or 0) if isinstance(directive, dict) else 0


def _passes_per_execution(event: dict[str, Any]) -> int:
    given = event.get("passes_per_execution")
    if given is not None:
        if not isinstance(given, int) or given < 1:
            raise InvalidInputError("passes_per_execution: a positive integer is required")
        return given
    raw = environment.get(ENV_PASSES_PER_EXECUTION)
    return int(raw) if raw else DEFAULT_PASSES_PER_EXECUTION


def park(rt: Runtime, event: Any) -> dict[str, Any]:
    """Park the run's current wait on the task token: an approval request, a signal waiter or a
    child agent run (``action: escalate``: the failed step, for a human)."""
    if event.get("action") == "escalate":
        return escalations.escalate(rt, event)
    token = task_token(event)
    state = event.get("state")
    if not isinstance(state, dict):
        raise InvalidInputError("state: the workflow's state is required")
    run_id, name, _ = log.start_fields(state)
    directive = state.get("directive") or {}
    seq = directive.get("seq")
    if not isinstance(seq, int) or seq < 1:
        raise InvalidInputError("state.directive.seq: the position of the wait is required")
    if directive.get("next") == log.APPROVE:
        settings = rt.settings.approvals
        outcome = requests.request(
            rt.approvals(),
            rt.store,
            rt.step_functions(),
            run_id=run_id,
            turn=seq,
            call=0,
            tool=str(directive.get("name")),
            tool_input=directive.get("details") or {},
            agent=name,
            token=token,
            timeout_seconds=int(directive.get("timeout_seconds") or settings.timeout_seconds),
            notify=publisher(rt.notifications(), settings) if settings.topic_arn else None,
        )
        return {"run_id": run_id, "seq": seq, **outcome}
    if directive.get("next") == log.DELEGATE:
        return children.delegate(rt, token, run_id, state, event.get("execution_name"))
    if directive.get("next") == log.SIGNAL:
        status = signals.register_waiter(rt.store, rt.step_functions(), run_id, str(directive.get("event")), directive.get("match") or {}, token)
        return {"run_id": run_id, "seq": seq, "event": directive.get("event"), "status": status}
    raise InvalidInputError(f"state.directive.next: {directive.get('next')!r} is not a wait a task token parks")


def _attach(rt: Runtime, run_id: str, name: str, workflow_input: dict[str, Any], existing: dict[str, Any] | None) -> dict[str, Any]:
    """Create the run record, or check that a recorded run is this one; its input is the record's."""
    if existing is None:
        try:
            rt.store.put_once(run_id, log.RUN, {"workflow": name, **codec.encode_json("input", workflow_input), "started_at": clock.now()})
            return workflow_input
        except AlreadyRecordedError:
            existing = rt.store.get(run_id, log.RUN)
            assert existing is not None
    if existing["workflow"] != name:
        raise RunConflictError(f"run_id: run {run_id!r} is a run of workflow {existing['workflow']!r}, not {name!r}")
    recorded = codec.decode_json("input", existing)
    if recorded != workflow_input:
        raise RunConflictError(f"input: run {run_id!r} was started with another input")
    return recorded


def _resume(event: dict[str, Any]) -> Resume | None:
    directive = event.get("directive")
    if not isinstance(directive, dict) or directive.get("next") not in _RESUMES or "resumed" not in event:
        return None
    return Resume(seq=int(directive["seq"]), kind=_RESUMES[directive["next"]], value=event["resumed"])


def _decision_reached(rt: Runtime, run_id: str, resume: Resume) -> None:
    """The decision the approval wait resumed with reached the run: a request its decider saw
    marked expired (the retry of a ``SendTaskSuccess`` whose response was lost heard
    ``TaskTimedOut``) is put back to it, as a tool call's is (``requests.decision_reached``)."""
    decision = resume.value if isinstance(resume.value, dict) else {}
    if decision.get("decision") in ("approve", "reject", "edit") and getattr(rt.store, "client", None) is not None:
        requests.decision_reached(rt.approvals(), rt.store, run_id, resume.seq, 0, decision)


def _ended(status: str, outcome: Any) -> dict[str, Any]:
    if status == log.FAILED:
        return {"next": log.FAILED, "error": str((outcome or {}).get("error")), "cause": str((outcome or {}).get("cause"))}
    if len(json.dumps(outcome)) > MAX_INLINE_OUTPUT_BYTES:
        return {"next": log.DONE, "output": {"output_record": log.FINAL, "note": "too large for the execution's output"}}
    return {"next": log.DONE, "output": outcome}


__all__ = ["advance", "park"]
