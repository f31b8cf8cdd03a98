"""Executions of a run's state machine, and the Lambda invocations their histories show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from longstep.executions import first_name
from longstep_kit.ops.views.records import epoch, json_value

# The state machine's step states (infra/constructs/agent_loop.py) and the kind of step each runs.
STEP_STATES = {"ModelTurn": "model", "CallTool": "tool", "CallOneTool": "tool"}

_LAMBDA_END = {"LambdaFunctionSucceeded": True, "LambdaFunctionFailed": False, "LambdaFunctionTimedOut": False}
_LAMBDA_EARLY_END = {"LambdaFunctionScheduleFailed", "LambdaFunctionStartFailed"}
_TASK_END = {"TaskSucceeded", "TaskFailed", "TaskTimedOut", "TaskAborted"}
_TASK_EARLY_END = {"TaskStartFailed", "TaskSubmitFailed"}


def execution_history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    """Every event of an execution's history, in order (every page of GetExecutionHistory)."""
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return sorted(events, key=lambda e: e["id"])
        kwargs["nextToken"] = page["nextToken"]


def run_id_of(execution_name: str) -> str:
    """The run an execution belongs to: its name without a generation suffix (``--gN``)."""
    return first_name(execution_name)


@dataclass(frozen=True)
class Execution:
    """One Step Functions execution of a run.

    Attributes:
        name: ``run_id`` or ``run_id-resume-N``.
        arn: the execution ARN.
        status: RUNNING, SUCCEEDED, FAILED, TIMED_OUT or ABORTED.
        started: start time (epoch seconds).
        stopped: stop time (epoch seconds), None while running.
    """

    name: str
    arn: str
    status: str
    started: float
    stopped: float | None = None


def execution_of(e: dict[str, Any]) -> Execution:
    """An execution from an item of Step Functions' ``ListExecutions``."""
    return Execution(
        name=e["name"], arn=e["executionArn"], status=e["status"], started=epoch(e["startDate"]) or 0.0, stopped=epoch(e.get("stopDate"))
    )


@dataclass
class Attempt:
    """One Lambda invocation, as the execution history shows it.

    Attributes:
        state: the state that invoked it (``ModelTurn``, ``CallTool``, ``RequestApproval``...).
        execution: the execution's name.
        entry: the id of the state's ``*StateEntered`` event (attempts of one entry are retries).
        turn: the turn the invocation worked on (None for Init and Finish).
        call: the tool call index (None for a model turn).
        function: the function ARN.
        started: when the invocation started (epoch seconds).
        seconds: how long the invocation ran (None while it runs).
        ok: whether it returned (False: it raised, crashed or timed out).
        error: the error name of a failed invocation.
        waited: for a task-token task, how long it then waited for its token (None while it waits).
        open_wait: a task-token task whose token has not been answered yet.
    """

    state: str
    execution: str
    entry: int
    turn: int | None
    call: int | None
    function: str
    started: float
    seconds: float | None
    ok: bool
    error: str | None = None
    waited: float | None = None
    open_wait: bool = False


def attempts_of(events: list[dict[str, Any]], execution: str) -> list[Attempt]:
    """The Lambda invocations in one execution's history, with their durations and outcomes.

    Each ``LambdaFunctionScheduled`` (a plain Lambda task) or ``TaskScheduled`` (a task-token
    task, or a request-response one through the Lambda integration) starts one attempt; its start, end (and ``TaskSubmitted``) events are found through
    ``previousEventId``, and so is the ``*StateEntered`` event of the state that made it.
    A task token is never read: only the ``item`` of a task's payload is.
    """
    by_id = {e["id"]: e for e in events}
    children: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        children.setdefault(event.get("previousEventId", 0), []).append(event)

    def child(parent: dict[str, Any] | None, types: Iterable[str]) -> dict[str, Any] | None:
        if parent is None:
            return None
        wanted = set(types)
        return next((e for e in children.get(parent["id"], []) if e["type"] in wanted), None)

    out = []
    for event in events:
        if event["type"] == "LambdaFunctionScheduled":
            details = event.get("lambdaFunctionScheduledEventDetails", {})
            payload, function = json_value(details.get("input")) or {}, details.get("resource", "")
            started = child(event, ["LambdaFunctionStarted"])
            end = child(started, _LAMBDA_END) or child(event, _LAMBDA_EARLY_END)
            submitted = None
            ok = bool(end) and _LAMBDA_END.get(end["type"], False)
        elif event["type"] == "TaskScheduled" and event.get("taskScheduledEventDetails", {}).get("resourceType") == "lambda":
            details = event["taskScheduledEventDetails"]
            params = json_value(details.get("parameters")) or {}
            body = params.get("Payload") if isinstance(params.get("Payload"), dict) else {}
            function = str(params.get("FunctionName", ""))
            started = child(event, ["TaskStarted"])
            if str(details.get("resource", "")).endswith("waitForTaskToken"):
                payload = body.get("item") or {}
                submitted = child(started, ["TaskSubmitted"])
                end = child(submitted, _TASK_END) or child(started, _TASK_END | _TASK_EARLY_END) or child(event, _TASK_EARLY_END)
                ok = submitted is not None
            else:  # request-response (CallTool, CheckCondition: the agent's function named at run time)
                payload, submitted = body, None
                end = child(started, _TASK_END | _TASK_EARLY_END) or child(event, _TASK_EARLY_END)
                ok = bool(end) and end["type"] == "TaskSucceeded"
        else:
            continue
        entered = _state_entered(event, by_id)
        state = entered.get("stateEnteredEventDetails", {}).get("name", "") if entered else ""
        began = epoch((started or event)["timestamp"])
        # A task-token task's Lambda returns at TaskSubmitted; what follows is the wait.
        lambda_end = submitted if submitted is not None else end
        seconds = None if lambda_end is None else max(0.0, epoch(lambda_end["timestamp"]) - began)
        turn, call = _turn_and_call(payload if isinstance(payload, dict) else {})
        attempt = Attempt(
            state=state,
            execution=execution,
            entry=entered["id"] if entered else event["id"],
            turn=turn,
            call=call,
            function=function,
            started=began,
            seconds=seconds,
            ok=ok,
            error=_error_of(end) if not ok and end is not None else None,
        )
        if submitted is not None:
            attempt.open_wait = end is None
            attempt.waited = None if end is None else max(0.0, epoch(end["timestamp"]) - epoch(submitted["timestamp"]))
        out.append(attempt)
    return out


def _state_entered(event: dict[str, Any], by_id: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    current = by_id.get(event.get("previousEventId", 0))
    for _ in range(10_000):  # a chain of retries; never loops, but never trusts that either
        if current is None or current["type"].endswith("StateEntered"):
            return current
        current = by_id.get(current.get("previousEventId", 0))
    return None


def _turn_and_call(payload: dict[str, Any]) -> tuple[int | None, int | None]:
    """A task's turn and call from its input: a tool item has ``turn`` and ``call``; a model turn's
    cursor names the turn to run as ``next_turn``."""
    if isinstance(payload.get("call"), int) and isinstance(payload.get("turn"), int):
        return payload["turn"], payload["call"]
    if isinstance(payload.get("next_turn"), int):
        return payload["next_turn"], None
    return None, None


def _error_of(event: dict[str, Any]) -> str:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, dict) and value.get("error"):
            return str(value["error"])
    return event["type"]
