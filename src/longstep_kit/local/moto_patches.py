"""Every change the local stack makes to moto, in one registry that undoes them all.

The local stack patches moto where moto differs from AWS or where it must run the real handlers
(in-process Lambda, the virtual clock, atomic DynamoDB writes, limits). Each patch goes through
:func:`patch`, which records the attribute it replaced, so :func:`undo_all` (called when the
stack stops) puts every original back, last patched first, and nothing leaks into the next
stack or the next test.

Each caller states, next to its ``patch`` call, what the replacement keeps identical to moto.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

_lock = threading.Lock()
# (owner, attribute name, the original as found in the owner's own __dict__ or None if inherited)
_applied: list[tuple[Any, str, Any, bool]] = []
_MISSING = object()


def patch(owner: Any, name: str, replacement: Any) -> Any:
    """Replace ``owner.name`` with ``replacement`` until :func:`undo_all`.

    Args:
        owner: a class or module.
        name: the attribute to replace.
        replacement: its new value.

    Returns:
        The value ``owner.name`` had (what a wrapper should call), None if it had none.
    """
    with _lock:
        own = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        original = getattr(owner, name, None)  # None: an attribute the owner lacks (an added API)
        _applied.append((owner, name, own, own is not _MISSING))
        setattr(owner, name, replacement)
        return original


def undo_all() -> None:
    """Put back every attribute :func:`patch` replaced, the last one first."""
    with _lock:
        while _applied:
            owner, name, own, had_own = _applied.pop()
            if had_own:
                setattr(owner, name, own)
            else:
                # The attribute was inherited (or set nowhere): remove ours so lookup finds it again.
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass


def applied() -> list[tuple[Any, str]]:
    """The (owner, name) pairs patched now, oldest first (for tests and reports)."""
    with _lock:
        return [(owner, name) for owner, name, _, _ in _applied]


# -- in-process Lambda ---------------------------------------------------------------------------


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


# -- atomic DynamoDB -----------------------------------------------------------------------------


def dynamodb_atomic(lock: Any, operations: tuple[str, ...]) -> None:
    """Wrap moto's DynamoDB ``operations`` in ``lock`` (idempotent: a locked one is left alone).

    Keeps identical: each operation's arguments, result and errors; only concurrent calls are
    serialized, as DynamoDB applies a conditional write atomically.
    """
    from moto.dynamodb.models import DynamoDBBackend

    for name in operations:
        method = getattr(DynamoDBBackend, name)
        if getattr(method, "__longstep_locked__", False):
            continue

        def locked(*args: Any, __method: Any = method, **kwargs: Any) -> Any:
            with lock:
                return __method(*args, **kwargs)

        locked.__longstep_locked__ = True  # type: ignore[attr-defined]
        locked.__wrapped__ = method  # type: ignore[attr-defined]
        patch(DynamoDBBackend, name, locked)


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


def virtual_clock(clock: Any) -> None:
    """Every wait in moto's Step Functions engine becomes a timer on ``clock`` (a VirtualClock).

    The engine's threads are counted (runnable from ``start()`` until their target returns) and
    its events park on the clock, so the clock knows when nothing can happen and skips to the
    earliest timer. Keeps identical: the engine's control flow, its threads and events'
    semantics (``wait`` returns the flag; a set-then-clear pulse wakes current waiters), every
    retry interval and wait duration (in virtual seconds), and the history it records.
    """
    import importlib
    import threading

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
        return int(when.timestamp() - clock.time())

    patch(Timestamp, "_get_wait_seconds", wait_seconds_until)

    # A handler at work keeps time still, whoever invoked it (an engine thread or a test calling
    # the approval API). Wraps the routed invoke: install after :func:`route_lambda`.
    from moto.awslambda_simple.models import LambdaSimpleBackend

    routed = LambdaSimpleBackend.invoke

    def invoke_keeping_time(backend: Any, *args: Any, **kwargs: Any) -> bytes:
        with clock.busy():
            return routed(backend, *args, **kwargs)

    patch(LambdaSimpleBackend, "invoke", invoke_keeping_time)


# -- StopExecution -------------------------------------------------------------------------------


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
    status becomes ABORTED. Keeps identical: moto's stop date, error and cause, and the
    ExecutionAborted event.
    """
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    original_stop = ExecutionWorker.stop

    def stop(worker: Any, stop_date: Any, error: Any, cause: Any) -> None:
        original_stop(worker, stop_date=stop_date, error=error, cause=cause)
        clock.interrupt(worker)

    patch(ExecutionWorker, "stop", stop)

    for name in ("set_error", "set_timed_out"):
        original = getattr(Environment, name)

        def keep_stopped(env: Any, *args: Any, __original: Any = original, **kwargs: Any) -> None:
            if isinstance(env._program_state, ProgramStopped):
                return  # stopped is final: what unwinds after the stop does not change it
            __original(env, *args, **kwargs)

        patch(Environment, name, keep_stopped)


# -- DynamoDB Query on a table's own key -------------------------------------------------------


def dynamodb_query_reads_one_partition(lock: Any) -> None:
    """A Query on a table's own key reads the items of its partition, not the whole table.

    moto's ``Table.query`` starts from ``all_items()``, which collects and sorts every item of the
    table, then keeps those of the queried partition and computes the size of each, matching or
    not: a Query costs O(table), and a long run's checkpoint reads grow with every turn. DynamoDB
    reads the partition's items in sort-key order, from the key condition on
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.html). Here, for a
    Query on the table's own key (no index), moto's query runs on the partition's items that
    satisfy the sort-key condition (a contiguous run in sort-key order: every key condition is a
    range) and the item just before and just after that run (moto looks one item past the last
    match to decide on ``LastEvaluatedKey``). Keeps identical: moto's own query code for the
    rest (sort order, ``ScanIndexForward``, ``ExclusiveStartKey``, ``Limit``, filter and
    projection expressions, the scanned count, ``LastEvaluatedKey``) and every Query on an
    index. Differs only where moto differed from DynamoDB: an item outside the key condition
    further away no longer ends a page that is within that item's size of 1 MB.

    Args:
        lock: the lock moto's DynamoDB operations run under (``atomicity.dynamodb_lock()``): the
            table's item listing is swapped for this call only.
    """
    import inspect

    from moto.dynamodb.models.table import Table

    original = Table.query
    signature = inspect.signature(original)

    def query(table: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(table, *args, **kwargs)
        call = bound.arguments
        if call.get("index_name"):  # (hash_key_conditions and range_key_conditions serve indexes only)
            return original(table, *args, **kwargs)
        hash_key, comparison, values = call.get("hash_key"), call.get("range_comparison"), call.get("range_objs") or []
        with lock:
            partition = table.items.get(hash_key) if hash_key is not None else None  # .get: items is a defaultdict
            if partition is None:
                candidates = []
            elif table.range_key_attr:
                candidates = _matching_run(partition.values(), comparison, values)
            else:
                candidates = [partition]
            table.all_items = lambda: candidates  # moto's query keeps those of this hash key, sorts, pages
            try:
                return original(table, *args, **kwargs)
            finally:
                del table.all_items

    patch(Table, "query", query)


def _matching_run(items: Any, comparison: str | None, values: list[Any]) -> list[Any]:
    """The items whose sort key meets the condition, with one neighbour on each side, sorted.

    Sorted once on each key's ``cast_value`` (moto's own order: ``DynamoType.__lt__`` compares
    them); the run is found by bisection for the ordering conditions, else by moto's ``compare``.
    """
    import bisect

    decorated = sorted(((item.range_key.cast_value, item) for item in items), key=lambda pair: pair[0])
    ordered = [item for _, item in decorated]
    if not comparison:
        return ordered
    keys = [key for key, _ in decorated]
    span = _bisected(keys, ordered, comparison, values, bisect)
    if span is None:  # another condition, or values of another type: moto's comparison, item by item
        hits = [i for i, item in enumerate(ordered) if item.range_key.compare(comparison, values)]
        span = (hits[0], hits[-1] + 1) if hits else (0, 0)
    low, high = span
    if low >= high:
        return []
    return ordered[max(low - 1, 0) : high + 1]


def _bisected(keys: list[Any], ordered: list[Any], comparison: str, values: list[Any], bisect: Any) -> tuple[int, int] | None:
    """[low, high) of the keys meeting an ordering condition, or None for another one."""
    if not ordered or any(v.type != ordered[0].range_key.type for v in values):
        return None
    bounds = [v.cast_value for v in values]
    op = comparison.upper()
    if op in ("EQ", "="):
        return bisect.bisect_left(keys, bounds[0]), bisect.bisect_right(keys, bounds[0])
    if op in ("LT", "<"):
        return 0, bisect.bisect_left(keys, bounds[0])
    if op in ("LE", "<="):
        return 0, bisect.bisect_right(keys, bounds[0])
    if op in ("GT", ">"):
        return bisect.bisect_right(keys, bounds[0]), len(keys)
    if op in ("GE", ">="):
        return bisect.bisect_left(keys, bounds[0]), len(keys)
    if op == "BETWEEN":
        return bisect.bisect_left(keys, bounds[0]), bisect.bisect_right(keys, bounds[1])
    if op == "BEGINS_WITH" and values[0].type == "S":
        low = high = bisect.bisect_left(keys, bounds[0])
        while high < len(keys) and keys[high].startswith(bounds[0]):
            high += 1
        return low, high
    return None


# -- moto's response serializer ----------------------------------------------------------------


def serializer_remembers_aliases() -> None:
    """moto's response serializer works out each member's candidate attribute names once.

    For every member of every structure it serializes, moto's ``AttributePicker`` asks six alias
    providers which attribute names to look up on the Python object; the answer depends only on
    the object's class, the member's name and its botocore shape, yet it is recomputed each time
    (a Step Functions history of 250 events: 45,000 members, 130,000 provider calls, 0.4 s).
    Here it is remembered per (picker class, alias providers, object class, member name, shape).
    Keeps identical: the names, their order, and the lookups and transformers moto applies to
    them; an object that carries its own ``Meta`` (explicit aliases on the instance) is not
    remembered.
    """
    from moto.core.serialize import AttributePicker, XFormedAttributePicker

    for cls in (AttributePicker, XFormedAttributePicker):
        _remember_possible_keys(cls)


def _remember_possible_keys(cls: Any) -> None:
    original = vars(cls)["get_possible_keys"]
    cache: dict[tuple[Any, ...], tuple[tuple[str, ...], Any]] = {}

    def get_possible_keys(picker: Any, context: Any) -> Any:
        obj, shape = context.obj, context.shape
        if "Meta" in getattr(obj, "__dict__", ()):  # aliases of this one object: ask every time
            return original(picker, context)
        key = (type(picker), tuple(picker.alias_providers), type(obj), context.key, id(shape))
        found = cache.get(key)
        if found is None:
            # The shape is kept with the answer: its id cannot be reused while the entry lives.
            found = cache[key] = (tuple(original(picker, context)), shape)
        return iter(found[0])

    patch(cls, "get_possible_keys", get_possible_keys)


# -- the engine's AWS clients ------------------------------------------------------------------


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
    import threading

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


# -- pinning: Lambda and state machine versions and aliases (issue 15) --------------------------
# moto 5.2.5 publishes both kinds of version, but a CloudFormation ``Ref`` to a Lambda version is
# not its ARN, and its Step Functions API lacks PublishStateMachineVersion,
# ListStateMachineVersions and DeleteStateMachineVersion, runs nothing started on an alias ARN,
# and records no version on an execution started on a version ARN. docs/local-fidelity.md.


def lambda_version_refs() -> None:
    """A CloudFormation ``Ref`` to an ``AWS::Lambda::Version`` is the version's ARN, as in AWS
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lambda-version.html);
    moto returns its model object. Keeps identical: moto's publish (a version per changed
    function, the same version again for an unchanged one) and the version's number.
    """
    from moto.awslambda.models import LambdaVersion
    from moto.awslambda.utils import get_backend

    original = vars(LambdaVersion)["create_from_cloudformation_json"].__func__

    def create(cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any) -> Any:
        version = original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        function = cloudformation_json["Properties"]["FunctionName"]
        version.physical_resource_id = get_backend(account_id, region_name).get_function(function, str(version.version)).function_arn
        return version

    patch(LambdaVersion, "create_from_cloudformation_json", classmethod(create))


def _version_target(backend: Any, arn: str) -> tuple[Any, Any, str | None]:
    """(state machine, version, alias ARN or None) that a version or alias ARN starts; (None, None, None)
    for any other ARN. An alias routes to the version with the largest weight: AWS picks at
    random by weight; the local stack's aliases route all traffic to one version."""
    from moto.stepfunctions.exceptions import StateMachineDoesNotExist

    base_arn, _, qualifier = arn.rpartition(":")
    if ":stateMachine:" not in base_arn or not qualifier:
        return None, None, None
    machine = next((m for m in backend.state_machines if m.arn == base_arn), None)
    if machine is None:
        return None, None, None
    if qualifier.isdigit():
        version = machine.versions.get(int(qualifier))
        if version is None:
            raise StateMachineDoesNotExist(f"State Machine Does Not Exist: '{arn}'")
        return machine, version, None
    alias = machine.aliases.get(qualifier)
    if alias is None:
        raise StateMachineDoesNotExist(f"State Machine Does Not Exist: '{arn}'")
    route = max(alias.routing_configuration, key=lambda r: r["weight"])
    return machine, machine.versions[int(route["stateMachineVersionArn"].rpartition(":")[2])], alias.arn


def state_machine_versions() -> None:
    """Executions on version and alias ARNs, and the version API moto lacks, as AWS documents them.

    - StartExecution on a version ARN runs that version's definition; on an alias ARN, the
      version the alias routes to. The execution belongs to the state machine (describe, list,
      stop, history, task tokens as for any other) and records its version and alias
      (``stateMachineVersionArn``, ``stateMachineAliasArn`` in DescribeExecution and
      ListExecutions; ListExecutions on a version ARN lists that version's executions):
      https://docs.aws.amazon.com/step-functions/latest/dg/execution-alias-version-associate.html
    - PublishStateMachineVersion publishes the current revision, or returns the version that
      already has it (idempotent):
      https://docs.aws.amazon.com/step-functions/latest/apireference/API_PublishStateMachineVersion.html
    - ListStateMachineVersions lists them newest first.
    - DeleteStateMachineVersion refuses a version an alias routes to (ConflictException) and
      leaves its running executions running:
      https://docs.aws.amazon.com/step-functions/latest/apireference/API_DeleteStateMachineVersion.html

    Keeps identical: moto's versions (numbering, definition snapshot, description), aliases,
    name idempotency of StartExecution (checked against all the state machine's executions) and
    the execution engine, which runs the version's definition like any other.
    """
    from moto.core.exceptions import AWSError
    from moto.core.responses import ActionResult, EmptyResult
    from moto.stepfunctions.exceptions import StateMachineDoesNotExist
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend
    from moto.stepfunctions.responses import StepFunctionResponse

    original_start = StepFunctionsParserBackend.start_execution

    def start_execution(backend: Any, state_machine_arn: str, name: Any = None, execution_input: Any = None, trace_header: Any = None) -> Any:
        machine, version, alias = _version_target(backend, state_machine_arn)
        if version is None:
            return original_start(backend, state_machine_arn, name, execution_input, trace_header)
        existing = machine._handle_name_input_idempotency(name, execution_input)
        if existing is not None:
            return existing
        # What the engine's start reads of a state machine: its backend, and the name check
        # (made above, on all the state machine's executions).
        version.backend = machine.backend
        version._handle_name_input_idempotency = lambda *_: None
        execution = original_start(backend, version.arn, name, execution_input, trace_header)
        version.executions.remove(execution)
        execution.longstep_version_arn = version.arn
        execution.longstep_alias_arn = alias
        machine.executions.append(execution)
        return execution

    patch(StepFunctionsParserBackend, "start_execution", start_execution)

    original_list = StepFunctionsParserBackend.list_executions

    def list_executions(backend: Any, state_machine_arn: str, status_filter: Any = None, **kwargs: Any) -> Any:
        machine, version, _ = _version_target(backend, state_machine_arn)
        if version is None:
            return original_list(backend, state_machine_arn, status_filter=status_filter, **kwargs)
        version.executions = [e for e in machine.executions if getattr(e, "longstep_version_arn", None) == version.arn]
        try:
            return original_list(backend, version.arn, status_filter=status_filter, **kwargs)
        finally:
            version.executions = []

    patch(StepFunctionsParserBackend, "list_executions", list_executions)

    def _associations(execution: Any) -> dict[str, str]:
        found = {
            "stateMachineVersionArn": getattr(execution, "longstep_version_arn", None),
            "stateMachineAliasArn": getattr(execution, "longstep_alias_arn", None),
        }
        return {k: v for k, v in found.items() if v}

    original_describe = StepFunctionResponse.describe_execution

    def describe_execution(response: Any) -> Any:
        result = original_describe(response)
        execution = response.stepfunction_backend.describe_execution(response._get_param("executionArn"))
        result.result.update(_associations(execution))
        if "stateMachineVersionArn" in result.result:  # the state machine's own ARN, not the version's
            result.result["stateMachineArn"] = result.result["stateMachineVersionArn"].rpartition(":")[0]
        return result

    patch(StepFunctionResponse, "describe_execution", describe_execution)

    original_list_response = StepFunctionResponse.list_executions

    def list_executions_response(response: Any) -> Any:
        result = original_list_response(response)
        by_arn = {e.execution_arn: e for m in response.stepfunction_backend.state_machines for e in m.executions}
        for item in result.result["executions"]:
            execution = by_arn.get(item["executionArn"])
            if execution is not None and _associations(execution):
                item.update(_associations(execution))
                item["stateMachineArn"] = item["stateMachineVersionArn"].rpartition(":")[0]
        return result

    patch(StepFunctionResponse, "list_executions", list_executions_response)

    def machine_of(backend: Any, arn: str) -> Any:
        machine = next((m for m in backend.state_machines if m.arn == arn), None)
        if machine is None:
            raise StateMachineDoesNotExist(f"State Machine Does Not Exist: '{arn}'")
        return machine

    def publish_state_machine_version(response: Any) -> Any:
        machine = machine_of(response.stepfunction_backend, response._get_param("stateMachineArn"))
        latest = machine.latest_version
        if latest is None or latest.definition != machine.definition or latest.roleArn != machine.roleArn:
            machine.publish(response._get_param("description"))
        return ActionResult({"stateMachineVersionArn": machine.latest_version.arn, "creationDate": machine.latest_version.creation_date})

    def list_state_machine_versions(response: Any) -> Any:
        machine = machine_of(response.stepfunction_backend, response._get_param("stateMachineArn"))
        versions = sorted(machine.versions.values(), key=lambda v: v.version, reverse=True)
        return ActionResult({"stateMachineVersions": [{"stateMachineVersionArn": v.arn, "creationDate": v.creation_date} for v in versions]})

    class ConflictException(AWSError):
        TYPE = "ConflictException"
        STATUS = 400

    def delete_state_machine_version(response: Any) -> Any:
        arn = response._get_param("stateMachineVersionArn")
        base_arn, _, number = arn.rpartition(":")
        machine = next((m for m in response.stepfunction_backend.state_machines if m.arn == base_arn), None)
        if machine is None or not number.isdigit():
            return EmptyResult()  # AWS: deleting a version that does not exist succeeds
        for alias in machine.aliases.values():
            if any(r["stateMachineVersionArn"] == arn for r in alias.routing_configuration):
                raise ConflictException(f"Version to be deleted must not be referenced by an alias: {alias.arn}")
        machine.versions.pop(int(number), None)
        return EmptyResult()

    for name, method in (
        ("publish_state_machine_version", publish_state_machine_version),
        ("list_state_machine_versions", list_state_machine_versions),
        ("delete_state_machine_version", delete_state_machine_version),
    ):
        patch(StepFunctionResponse, name, method)
