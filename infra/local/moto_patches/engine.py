"""moto's Step Functions engine and Lambda: handlers in-process, the virtual clock, StopExecution,
the engine's clients, SendTaskFailure's cause."""

from __future__ import annotations

import math

import threading
from typing import Any, Callable

from longstep_kit.local.moto_patches.registry import fidelity, harness, speed, patch

# -- in-process Lambda ---------------------------------------------------------------------------


@harness
def route_lambda(invoke: Callable[[Any, bytes | str, dict[str, str]], bytes]) -> None:
    """moto's Lambda ``Invoke`` calls ``invoke(fn, body, response_headers)`` in-process.

    Keeps identical: moto's function lookup (name, qualifier, ARN) and the response it builds
    from the returned payload and the ``x-amz-function-error`` header.
    """
    from moto.awslambda_simple.models import LambdaSimpleBackend

    def routed(backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any) -> bytes:
        fn = backend.get_function(function_name, qualifier)
        return invoke(fn, body, response_headers)

    patch(LambdaSimpleBackend, "invoke", routed)


# -- the virtual clock ---------------------------------------------------------------------------

# moto modules whose threads and events become the clock's: (module, attributes to replace,
# whether a StopExecution wakes the module's event waits). Waits on other engine threads (a
# task's worker, a Map's iterations) are not woken: they end once those threads unwind.
_ENGINE_MODULES = (
    ("moto.stepfunctions.parser.backend.execution_worker", ("Thread",), False),
    ("moto.stepfunctions.parser.asl.component.program.program", ("threading",), False),
    ("moto.stepfunctions.parser.asl.component.state.exec.execute_state", ("threading", "Thread"), False),
    ("moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component", ("threading",), False),
    ("moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job", ("threading",), False),
    ("moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branch_worker", ("threading",), False),
    ("moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branches_decl", ("threading",), False),
    ("moto.stepfunctions.parser.asl.eval.environment", ("threading",), True),
    ("moto.stepfunctions.parser.asl.eval.callback.callback", ("Event",), True),  # task tokens, heartbeats
)


@harness
def virtual_clock(clock: Any) -> None:
    """Every wait in moto's Step Functions engine becomes a timer on ``clock`` (a VirtualClock).

    The engine's threads are counted (runnable from ``start()`` until their target returns) and
    its events park on the clock, so the clock knows when nothing can happen and skips to the
    earliest timer. Keeps identical: the engine's control flow, its threads and events'
    semantics (``wait`` returns the flag; a set-then-clear pulse wakes current waiters), every
    retry interval and wait duration (in virtual seconds), and the history it records.
    """
    import importlib

    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.timestamp import Timestamp
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    from longstep_kit.local.clock import ClockEvent, CountedThread

    thread_class = type("ClockThread", (CountedThread,), {"clock": clock})

    class EngineThreading:
        """The ``threading`` module as the engine sees it: threads and events on the clock."""

        Thread = thread_class

        def __init__(self, interruptible: bool) -> None:
            self.interruptible = interruptible

        def Event(self) -> ClockEvent:  # noqa: N802 - the name threading uses
            return ClockEvent(clock, self.interruptible)

        def __getattr__(self, name: str) -> Any:
            return getattr(threading, name)

    for module_name, names, interruptible in _ENGINE_MODULES:
        module = importlib.import_module(module_name)
        shim = EngineThreading(interruptible)
        replacements = {"threading": shim, "Thread": thread_class, "Event": shim.Event}
        for name in names:
            patch(module, name, replacements[name])

    class RetrierTime:
        """The ``time`` module as the retrier sees it: ``sleep`` is a timer on the clock."""

        def __getattr__(self, name: str) -> Any:
            import time

            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            clock.sleep(seconds, retry=True)

    patch(retrier_decl, "time", RetrierTime())

    def wait_interval(component: Any, env: Any, wait_seconds: float) -> None:
        # As moto: wait on the program's state event (a stop wakes it), here on virtual time.
        with clock.lock:
            clock.waits.append(wait_seconds)
        if wait_seconds > 0:
            env.program_state_event.wait(wait_seconds)

    patch(WaitFunction, "_wait_interval", wait_interval)

    def wait_seconds_until(component: Any, env: Any) -> int:
        # moto subtracts the host's naive local time; AWS waits until the instant the timestamp
        # names (UTC when it carries no offset): https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html
        import datetime as dt

        component.string.eval(env=env)
        text = env.stack.pop()
        when = component._from_timestamp_string(timestamp=text)
        if when is None:  # moto's own failure: not an ISO 8601 timestamp
            from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEventException

            raise FailureEventException(component._create_failure_event(env, text))
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        # Whole seconds (moto's contract), rounded up: the state ends at the instant or after it,
        # never before (int() woke a wait begun at x.78 s 0.78 s early, and the next turn saw a
        # time before its timer's end).
        return max(0, math.ceil(when.timestamp() - clock.time()))

    patch(Timestamp, "_get_wait_seconds", wait_seconds_until)

    # A handler at work keeps time still, whoever invoked it (an engine thread or a test calling
    # the approval API). Wraps the routed invoke: install after :func:`route_lambda`.
    from moto.awslambda_simple.models import LambdaSimpleBackend

    routed = LambdaSimpleBackend.invoke

    def invoke_keeping_time(backend: Any, *args: Any, **kwargs: Any) -> bytes:
        with clock.busy():
            return routed(backend, *args, **kwargs)

    patch(LambdaSimpleBackend, "invoke", invoke_keeping_time)


# -- an execution's end -------------------------------------------------------------------------


@harness
def execution_end_notifies(notify: Callable[[], None]) -> None:
    """``notify()`` runs on the engine's thread once an execution has ended, whatever its status.

    A local run's driver waits for this instead of asking ``DescribeExecution`` every few
    milliseconds (it still asks once the execution has ended, and reads the status there).
    Keeps identical: the execution's logic, its status (moto sets it before ``notify`` runs) and
    its history; an error of moto's own still ends the thread after ``notify`` has run.
    """
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    original = ExecutionWorker._execution_logic

    def execution_logic(worker: Any) -> None:
        try:
            original(worker)
        finally:
            notify()

    patch(ExecutionWorker, "_execution_logic", execution_logic)


# -- StopExecution -------------------------------------------------------------------------------


class ExecutionStoppedError(RuntimeError):
    """A task of a stopped execution was about to invoke its function (it invokes nothing)."""


@fidelity(
    "https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html",
    "https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html",
)
def stop_execution_aborts(clock: Any) -> None:
    """``StopExecution`` ends an execution at once, wherever it is parked, as in AWS.

    AWS: StopExecution stops the execution (status ABORTED,
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html), and
    its task tokens are closed (``SendTaskSuccess`` on one answers ``TaskTimedOut``: "the task
    associated with the token has already been closed",
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html;
    moto, which looks for the token among running executions only, answers ``InvalidToken``).
    moto only marks the program stopped: a task parked on a token stays RUNNING until its
    timeout, which then overwrites the stop with an error. Here the stop wakes every waiter of
    the execution parked on a token or a timer (they unwind without running another state; a
    handler that is running finishes first, as a Lambda invocation does in AWS), and a stopped
    program keeps its stopped state against the errors and timeouts of that unwinding, so the
    status becomes ABORTED.

    A stop can also come before the program runs its first state (right after
    ``StartExecution``): moto's ``ExecutionWorker.stop`` raised ``AttributeError`` on
    ``None.set_stop`` while the engine's thread had not built the execution's environment yet
    (the API answered 500), and ``Environment.set_stop`` ignores a program not yet running; either
    way the execution ran on to SUCCEEDED. AWS accepts a stop at any moment of a running
    execution. Here such a stop is kept (on the worker, then on the environment) and applied as
    the program starts, before its first state: it ends at once, with ``ExecutionStarted`` then
    ``ExecutionAborted`` in its history. Keeps identical: moto's stop date, error and cause, and
    the ExecutionAborted event.

    A task runs its Lambda call on a thread of its own, after the state's loop has checked that
    the program runs: a sibling iteration of a Map that had entered its Task state when the stop
    came invoked its function after it (``tests/local/test_stop_map_sibling.py`` holds one
    there). In AWS no task is started after StopExecution. Here the call checks, under the
    frame's state lock that the stop takes too, that its program still runs, and a stopped one
    invokes nothing (the task fails quietly into the unwinding, which keeps the stop).
    """
    from moto.stepfunctions.parser.asl.component.program.program import Program
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    pending_stop = "_longstep_pending_stop"
    # Guards the early-stop hand-off: a stop either reaches a running program or leaves itself
    # where the program's start picks it up, never neither.
    early_lock = threading.Lock()

    original_stop = ExecutionWorker.stop
    original_environment = ExecutionWorker._get_evaluation_environment
    original_set_stop = Environment.set_stop
    original_eval_body = Program._eval_body

    def stop(worker: Any, stop_date: Any, error: Any, cause: Any) -> None:
        with early_lock:
            early = worker.env is None  # the engine's thread has not built the environment yet
            if early:
                setattr(worker, pending_stop, {"stop_date": stop_date, "error": error, "cause": cause})
        if not early:
            original_stop(worker, stop_date=stop_date, error=error, cause=cause)
        clock.interrupt(worker)

    patch(ExecutionWorker, "stop", stop)

    def evaluation_environment(worker: Any) -> Any:
        env = original_environment(worker)
        with early_lock:
            worker.env = env  # moto assigns it too, just after: the same object
            pending = worker.__dict__.pop(pending_stop, None)
        if pending is not None:
            env.set_stop(**pending)
        return env

    patch(ExecutionWorker, "_get_evaluation_environment", evaluation_environment)

    def set_stop(env: Any, stop_date: Any, cause: Any, error: Any) -> None:
        with early_lock:
            early = env._program_state is None  # built, but the program has not started
            if early:
                setattr(env, pending_stop, {"stop_date": stop_date, "error": error, "cause": cause})
        if not early:
            original_set_stop(env, stop_date=stop_date, cause=cause, error=error)

    patch(Environment, "set_stop", set_stop)

    def eval_body(program: Any, env: Any) -> None:
        # The program is running now (its start state is set): a stop kept for it applies here.
        with early_lock:
            pending = env.__dict__.pop(pending_stop, None)
        if pending is not None:
            original_set_stop(env, **pending)
        original_eval_body(program, env)

    patch(Program, "_eval_body", eval_body)

    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    for name in ("execute_lambda_function_integration", "exec_lambda_function"):
        invoke = getattr(lambda_eval_utils, name)

        def invoke_unless_stopped(env: Any, *args: Any, __invoke: Any = invoke, **kwargs: Any) -> Any:
            with env._state_mutex:  # Environment.set_stop takes it to stop each frame
                stopped = isinstance(env._program_state, ProgramStopped)
            if stopped:
                raise ExecutionStoppedError("the execution was stopped before this task invoked its function")
            return __invoke(env, *args, **kwargs)

        patch(lambda_eval_utils, name, invoke_unless_stopped)

    for name in ("set_error", "set_timed_out"):
        original = getattr(Environment, name)

        def keep_stopped(env: Any, *args: Any, __original: Any = original, **kwargs: Any) -> None:
            if isinstance(env._program_state, ProgramStopped):
                return  # stopped is final: what unwinds after the stop does not change it
            __original(env, *args, **kwargs)

        patch(Environment, name, keep_stopped)

    # An execution just started is RUNNING before its thread has built its environment: a task
    # token's answer sent then (a child run's Finish while its parent's run starts again) read
    # ``None.callback_pool_manager`` and failed with AttributeError. Such an execution holds no
    # token and no map run yet, so the lookups of SendTask*, heartbeats and map runs pass it by.
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original_executions = StepFunctionsParserBackend._get_executions

    def started_executions(backend: Any, execution_status: Any = None) -> list[Any]:
        return [e for e in original_executions(backend, execution_status) if getattr(e.exec_worker, "env", None) is not None]

    patch(StepFunctionsParserBackend, "_get_executions", started_executions)


# -- the engine's AWS clients ------------------------------------------------------------------


@speed
def engine_reuses_clients() -> None:
    """moto's Step Functions engine reuses one boto3 client per service and region.

    The engine's ``boto_client_for`` builds a new boto3 client (a new session: the service model
    loaded and parsed again) for every task it runs, a Lambda invoke among them: about a tenth of
    a long local run's CPU. Lambda itself keeps the service's connection warm; here the engine
    keeps its clients for the life of the local stack (this patch is undone when it stops, so a
    client never outlives the stack's IAM enforcement hooks). The ``boto3`` that
    ``boto_client_for`` calls is replaced by one that remembers the clients it made. Keeps
    identical: every argument moto passes (its fixed credentials, its no-retry, no-validation
    config, the endpoint when moto runs as a server); a client per distinct set of them.
    """

    import boto3
    from moto.stepfunctions.parser.asl.utils import boto_client

    clients: dict[tuple[Any, ...], Any] = {}
    lock = threading.Lock()

    class RememberingBoto3:
        """``boto3`` as ``boto_client_for`` sees it: ``client`` made once per set of arguments."""

        def __getattr__(self, name: str) -> Any:
            return getattr(boto3, name)

        @staticmethod
        def client(*args: Any, config: Any = None, **kwargs: Any) -> Any:
            # The config is built anew on each call with the same fixed values: not part of the key.
            key = (args, tuple(sorted(kwargs.items())))
            with lock:
                if key not in clients:
                    clients[key] = boto3.client(*args, config=config, **kwargs)
                return clients[key]

    patch(boto_client, "boto3", RememberingBoto3())


@fidelity("https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskFailure.html")
def send_task_failure_keeps_cause() -> None:
    """``SendTaskFailure`` hands its ``cause`` to the waiting task, as in AWS.

    AWS: the task fails with the given error and cause, which a Catch puts at its ResultPath as
    ``{"Error", "Cause"}``
    (https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskFailure.html).
    moto 5.2.5's response handler reads only ``error`` and drops ``cause``. Keeps identical:
    the backend call, its errors, and the empty response.
    """
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.responses import StepFunctionResponse

    original = StepFunctionResponse.send_task_failure

    def send_task_failure(response: Any) -> Any:
        cause = response._get_param("cause")
        if cause is None:
            return original(response)
        response.stepfunction_backend.send_task_failure(response._get_param("taskToken"), error=response._get_param("error"), cause=cause)
        return EmptyResult()

    patch(StepFunctionResponse, "send_task_failure", send_task_failure)
