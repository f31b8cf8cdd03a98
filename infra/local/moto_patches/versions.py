"""Lambda and state machine versions and aliases (pinning, issue 15): what moto 5.2.5 lacks."""

from __future__ import annotations

from typing import Any

from longstep_kit.local.moto_patches.registry import add, fidelity, patch

# -- pinning: Lambda and state machine versions and aliases (issue 15) --------------------------
# moto 5.2.5 publishes both kinds of version, but a CloudFormation ``Ref`` to a Lambda version is
# not its ARN, and its Step Functions API lacks PublishStateMachineVersion,
# ListStateMachineVersions and DeleteStateMachineVersion, runs nothing started on an alias ARN,
# and records no version on an execution started on a version ARN. docs/local-fidelity.md.


@fidelity("https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lambda-version.html")
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


@fidelity("https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbus.html")
def event_bus_refs() -> None:
    """A CloudFormation ``Ref`` to an ``AWS::Events::EventBus`` is the bus's name, as in AWS
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbus.html);
    moto returns its model object, which a rule on the bus (``EventBusName``) cannot use. Keeps
    identical: the bus moto creates, and its name.
    """
    from moto.events.models import EventBus

    add(EventBus, "physical_resource_id", property(lambda bus: bus.name))


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


@fidelity(
    "https://docs.aws.amazon.com/step-functions/latest/dg/execution-alias-version-associate.html",
    "https://docs.aws.amazon.com/step-functions/latest/apireference/API_PublishStateMachineVersion.html",
    "https://docs.aws.amazon.com/step-functions/latest/apireference/API_DeleteStateMachineVersion.html",
)
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
        add(StepFunctionResponse, name, method)  # APIs moto 5.2.5 lacks


@fidelity(
    "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-lambda-permissions",
    "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_DisableRule.html",
)
def event_rules_invoke_lambda() -> None:
    """A rule's Lambda target gets the matching events, asynchronously, as EventBridge invokes it
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-lambda-permissions).
    moto delivers to logs, SQS and buses only, and raises NotImplementedError on a Lambda target
    (a 500 to the caller of ``PutEvents``). A disabled rule matches no event, as in AWS ("A
    disabled rule won't match any events":
    https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_DisableRule.html); moto
    delivered to it. Keeps identical: moto's pattern matching, the event it builds (``detail`` as
    an object) and its delivery to every other kind of target of an enabled rule.
    """
    import copy
    import json
    import threading

    from moto.awslambda.utils import get_backend
    from moto.events.models import Rule
    from moto.utilities.arns import parse_arn

    original = Rule.send_to_targets

    def send_to_targets(rule: Any, original_event: Any, transform_input: bool = True) -> None:
        if rule.state == "DISABLED" or not rule.event_pattern.matches_event(original_event):
            return
        lambdas = [t for t in rule.targets if parse_arn(t["Arn"]).service == "lambda"]
        if len(lambdas) < len(rule.targets):
            others = copy.copy(rule)
            others.targets = [t for t in rule.targets if t not in lambdas]
            original(others, original_event, transform_input)
        for target in lambdas:
            arn = parse_arn(target["Arn"])
            backend = get_backend(arn.account, arn.region)  # the simple backend the dispatcher routes
            body = json.dumps(original_event, default=str)
            # An asynchronous invoke: PutEvents answers before the function runs.
            threading.Thread(target=backend.invoke, args=(target["Arn"], None, body, {}, {}), name="longstep-event-target", daemon=True).start()

    patch(Rule, "send_to_targets", send_to_targets)


@fidelity("https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html")
def execution_status_events() -> None:
    """An execution that ends puts a ``Step Functions Execution Status Change`` event on the
    default bus, as Step Functions does (best effort:
    https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html); moto sends none.
    The event carries the fields rules match on (``executionArn``, ``stateMachineArn``, ``name``,
    ``status``, ``input``). Keeps identical: moto's setting of the status, and the delivery
    (``event_rules_invoke_lambda``: a Lambda target runs asynchronously).
    """
    import json

    from moto.events.models import events_backends
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    original = BaseExecutionWorkerCommunication.terminated

    def terminated(comm: Any) -> None:
        original(comm)
        execution = comm.execution
        status = getattr(execution.exec_status, "value", str(execution.exec_status))
        detail = {
            "executionArn": execution.exec_arn,
            "stateMachineArn": execution.state_machine_arn,
            "name": execution.name,
            "status": status,
            "input": json.dumps(execution.input_data),
        }
        entry = {
            "Source": "aws.states",
            "DetailType": "Step Functions Execution Status Change",
            "Detail": json.dumps(detail),
            "EventBusName": "default",
        }
        events_backends[execution.account_id][execution.region_name].put_events([entry])

    patch(BaseExecutionWorkerCommunication, "terminated", terminated)
