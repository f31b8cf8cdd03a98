"""Patches to moto's Step Functions engine where it is more lenient than AWS (installed with the
local stack's enforcement; the clock's and the Lambda routing's patches are in ``moto_patches``).

moto's engine (``moto.stepfunctions.parser.asl``) is a copy of LocalStack's interpreter. Each
patch below replaces one method, fails the way AWS's documentation says, and keeps everything
else identical: it calls the original method for every case it does not change. Each is a
fidelity fix of the moto patch registry (``moto_patches.registry``: marked with the AWS page it
follows, refused at start if moto lost the attribute it replaces); :class:`MotoPatches` installs
them with the local stack's enforcement and undoes them with it.

1. A Choice rule whose ``Variable`` path is absent from the input: moto treats the rule as false
   and moves on; AWS fails the execution with ``States.Runtime``
   (https://docs.aws.amazon.com/step-functions/latest/dg/amazon-states-language-choice-state.html:
   "If the state input doesn't contain the $.type field, the execution fails"). ``IsPresent``
   rules keep moto's behaviour: testing for absence is what they are for.
2. ``States.ALL`` in a Retry or Catch: moto matches every error; AWS's ``States.ALL`` "can't catch
   the States.DataLimitExceeded terminal error or Runtime error types"
   (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html).
3. The 25,000-event history quota (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html):
   moto has none. An execution whose history holds that many events fails with ``States.Runtime``
   when it enters its next state (AWS documents that the execution fails, not the error name).
4. A task token whose task is over: moto accepts ``SendTaskSuccess``/``SendTaskFailure`` for a
   token whose wait timed out (it never reports the timeout to the token) or that was already
   answered; AWS answers ``TaskTimedOut`` ("the task token has either expired or the task
   associated with the token has already been closed",
   https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html).
   A token is over once it has an answer, or once the frame its task waited in has ended (moto
   ends it when the task times out). The patch here records that frame with the token;
   :func:`task_closed` reads it, and the local stack's fidelity hook answers ``TaskTimedOut``.
   The hook runs in the client's process before the request, so two answers sent at once could
   both pass it (and moto kept the last: a signal handed to a wait by one sender was replaced
   by another's and lost), and a client in another process (``local serve``) had no hook at all.
   Moto's callback pool itself now takes one answer per token, under a lock, and refuses any
   other with ``TaskTimedOut``.
5. An error of the ``States.`` family inside a Map iteration or a Parallel branch (a
   ``States.DataLimitExceeded``, the history limit's ``States.Runtime``, a ``States.Timeout``
   not caught inside): moto's engine re-raises it from the Map or Parallel as a custom error
   name, which may not begin with ``States.``, so the state failed with moto's own
   ``States.Runtime`` ("Custom Error Names MUST NOT begin with the prefix 'States.'") instead.
   AWS fails the Map or Parallel with the iteration's error and cause, which its Retry and
   Catch then see by that name
   (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html). The
   patch gives those two places a ``States.`` error name for such errors (found by the
   history-limit test of a whole run, tests/local/test_limits_runs.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep_kit.local.limits import MAX_HISTORY_EVENTS
from longstep_kit.local.moto_patches.registry import applied, fidelity, patch, undo

_STEP_FUNCTIONS_DOCS = "https://docs.aws.amazon.com/step-functions/latest/"
_CHOICE_PAGE = _STEP_FUNCTIONS_DOCS + "dg/amazon-states-language-choice-state.html"
_ERRORS_PAGE = _STEP_FUNCTIONS_DOCS + "dg/concepts-error-handling.html"
_QUOTAS_PAGE = _STEP_FUNCTIONS_DOCS + "dg/service-quotas.html"
_SEND_TASK_SUCCESS_PAGE = _STEP_FUNCTIONS_DOCS + "apireference/API_SendTaskSuccess.html"

_TERMINAL_ERRORS = ("States.DataLimitExceeded", "States.Runtime")


def _runtime_failure(env: Any, cause: str) -> Exception:
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent, FailureEventException
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    return FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesRuntime),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(taskFailedEventDetails=TaskFailedEventDetails(error=StatesErrorNameType.StatesRuntime.to_name(), cause=cause)),
        )
    )


def _error_name(error_name: str | None) -> Any:
    """A ``States.`` error keeps its name; any other is a custom error name (moto's own)."""
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName

    if error_name is not None and error_name.startswith("States."):
        try:
            return StatesErrorName.from_name(error_name)
        except ValueError:
            pass  # a States. name moto does not know: its own behaviour
    return CustomErrorName(error_name=error_name)


def task_closed(endpoint: Any) -> bool:
    """Whether the task of a moto callback endpoint (a task token) is over: answered, or timed out."""
    if endpoint.get_outcome() is not None or endpoint.consumer_error is not None:
        return True
    frame = endpoint.__dict__.get("_longstep_frame")
    return frame is not None and not frame.is_running()


@fidelity(_CHOICE_PAGE)
def choice_on_an_absent_path_fails() -> None:
    """1. A Choice rule (other than ``IsPresent``) on a path absent from the input fails with ``States.Runtime``."""
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.comparison_operator_type import ComparisonOperatorType
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.comparison_variable import ComparisonVariable
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.variable import NoSuchVariable

    original_comparison = ComparisonVariable._eval_body

    def comparison(component: Any, env: Any) -> None:
        if component.comparison_function.operator_type == ComparisonOperatorType.IsPresent:
            return original_comparison(component, env)
        component.variable.eval(env)
        value = env.stack[-1]
        if isinstance(value, NoSuchVariable):
            path = component.variable.string_sampler.literal_value
            raise _runtime_failure(env, f"Invalid path '{path}': The choice state's condition path references an invalid value.")
        component.comparison_function.eval(env)  # the rest of the original, unchanged

    patch(ComparisonVariable, "_eval_body", comparison)


@fidelity(_ERRORS_PAGE)
def states_all_spares_terminal_errors() -> None:
    """2. ``States.ALL`` in a Retry or Catch does not match ``States.DataLimitExceeded`` nor ``States.Runtime``."""
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl

    original_error_equals = ErrorEqualsDecl._eval_body

    def error_equals(component: Any, env: Any) -> None:
        error_name = env.stack[-1]
        name = getattr(error_name, "error_name", error_name)
        if name in _TERMINAL_ERRORS and ErrorEqualsDecl._STATE_ALL_ERROR in component.error_names:
            env.stack.pop()
            env.stack.append(name in [getattr(n, "error_name", n) for n in component.error_names])
            return
        original_error_equals(component, env)

    patch(ErrorEqualsDecl, "_eval_body", error_equals)


@fidelity(_QUOTAS_PAGE)
def history_limit(limit: Callable[[], int]) -> None:
    """3. A state entered with ``limit()`` history events already recorded fails the execution with ``States.Runtime``."""
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    original_state = CommonStateField._eval_body

    def state(component: Any, env: Any) -> None:
        events, most = len(env.event_manager._history_event_list), limit()
        if events >= most:
            raise _runtime_failure(env, f"The execution reached the maximum number of history events ({most}).")
        original_state(component, env)

    patch(CommonStateField, "_eval_body", state)


@fidelity(_SEND_TASK_SUCCESS_PAGE)
def closed_tokens_refused() -> None:
    """4. An answer for a task token whose task is over (answered, or timed out) is refused with ``TaskTimedOut``."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackPoolManager

    original_wait = StateTaskServiceCallback._eval_wait_for_task_token

    def wait(component: Any, env: Any, timeout_seconds: Any, callback_endpoint: Any, heartbeat_endpoint: Any) -> Any:
        # The frame the task waits in: when the task times out, moto ends that frame.
        callback_endpoint.__dict__["_longstep_frame"] = env
        return original_wait(component, env, timeout_seconds, callback_endpoint, heartbeat_endpoint)

    original_notify = CallbackPoolManager.notify
    answering = threading.Lock()

    def notify(manager: Any, callback_id: Any, outcome: Any) -> bool:
        with answering:  # one answer per token, whoever sends it and from where
            endpoint = manager._pool.get(callback_id)
            if endpoint is not None and task_closed(endpoint):
                from moto.core.exceptions import JsonRESTError

                raise JsonRESTError("TaskTimedOut", "Task Timed Out: the task of this token has already been closed")
            return original_notify(manager, callback_id, outcome)

    patch(StateTaskServiceCallback, "_eval_wait_for_task_token", wait)
    patch(CallbackPoolManager, "notify", notify)


@fidelity(_ERRORS_PAGE)
def map_and_parallel_keep_states_errors() -> None:
    """5. A ``States.`` error inside a Map iteration or a Parallel branch fails the state by its own name."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import iteration_worker
    from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl

    for module in (iteration_worker, branches_decl):
        patch(module, "CustomErrorName", _error_name)


@dataclass
class MotoPatches:
    """The five fixes above, installed with the local stack's enforcement and undone with it."""

    max_history_events: int = MAX_HISTORY_EVENTS
    _patched: list[tuple[Any, str]] = field(default_factory=list)

    def install(self) -> None:
        before = len(applied())
        choice_on_an_absent_path_fails()
        states_all_spares_terminal_errors()
        history_limit(lambda: self.max_history_events)
        closed_tokens_refused()
        map_and_parallel_keep_states_errors()
        self._patched = applied()[before:]

    def uninstall(self) -> None:
        while self._patched:
            undo(*self._patched.pop())
