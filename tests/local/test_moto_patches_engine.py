"""moto's Step Functions engine and its parsers as the local stack patches them, checked against
moto's own behaviour: the same calls give the same answers with the patch as without it
(``longstep_kit.local.moto_patches``; the DynamoDB, serializer and plumbing patches are
``tests/local/test_moto_patches.py``'s)."""

from __future__ import annotations

import json
import threading
from typing import Any

import boto3
import pytest
from moto import mock_aws

from longstep_kit.local import moto_patches

REGION = "us-east-1"


def _lambda_machine_history(sfn: Any, machine: str, name: str) -> list[Any]:
    import json

    from longstep_kit.testing.wait import wait_execution

    execution = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps({"n": 1}))["executionArn"]
    described = wait_execution(sfn, execution, 60)
    events = sfn.get_execution_history(executionArn=execution)["events"]
    # What the engine did, without the times and ids that differ between any two executions.
    return [described["status"], described.get("output")] + [(e["type"], {k: v for k, v in e.items() if k.endswith("EventDetails")}) for e in events]


def test_the_engine_reuses_its_clients_and_runs_as_moto_does():
    import io
    import json
    import zipfile

    from moto.stepfunctions.parser.asl.utils import boto_client

    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as zf:
        zf.writestr("index.py", "def handler(event, context):\n    return event\n")
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="engine", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        fn = boto3.client("lambda", region_name=REGION).create_function(
            FunctionName="echo", Runtime="python3.12", Role=role, Handler="index.handler", Code={"ZipFile": code.getvalue()}
        )["FunctionArn"]
        task = {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": fn, "Payload.$": "$"},
            "ResultSelector": {"n.$": "$.StatusCode"},
        }
        definition = {"StartAt": "A", "States": {"A": {**task, "Next": "B"}, "B": {**task, "End": True}}}
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(name="twice", definition=json.dumps(definition), roleArn=role)["stateMachineArn"]
        as_moto = _lambda_machine_history(sfn, machine, "plain")
        moto_patches.engine_reuses_clients()
        made = []
        try:
            first = _lambda_machine_history(sfn, machine, "reused-1")
            import boto3 as real_boto3

            real_client = real_boto3.client
            real_boto3.client = lambda *a, **k: made.append(k.get("service_name")) or real_client(*a, **k)
            try:
                second = _lambda_machine_history(sfn, machine, "reused-2")
            finally:
                real_boto3.client = real_client
        finally:
            moto_patches.undo_all()
        assert boto_client.boto3 is real_boto3  # undone
    assert first == as_moto and second == as_moto
    assert as_moto[0] == "SUCCEEDED" and sum(1 for e in as_moto[2:] if e[0] == "TaskSucceeded") == 2
    assert made == []  # the second execution's two invokes made no new client


_DEFINITION = json.dumps(
    {
        "StartAt": "Pick",
        "States": {
            "Pick": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericGreaterThan": 1, "Next": "Big"}], "Default": "Small"},
            "Big": {"Type": "Pass", "Result": "big", "End": True},
            "Small": {"Type": "Pass", "Result": "small", "End": True},
        },
    }
)


def test_a_definition_is_parsed_once_and_each_execution_gets_its_own_program():
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser, ASLParserException

    shipped_program, _ = AmazonStateLanguageParser.parse(_DEFINITION)
    moto_patches.definitions_parse_once()
    try:
        first, tree = AmazonStateLanguageParser.parse(_DEFINITION)
        second, same_tree = AmazonStateLanguageParser.parse(_DEFINITION)
        assert same_tree is tree  # the ANTLR tree is kept...
        assert second is not first  # ...each execution still gets a program of its own
        assert type(second) is type(first) is type(shipped_program)
        assert list(second.states.states) == list(shipped_program.states.states) == ["Pick", "Big", "Small"]
        for _ in range(2):  # a bad definition is refused every time (nothing is kept for it)
            with pytest.raises(ASLParserException):
                AmazonStateLanguageParser.parse('{"StartAt": "Nowhere", "States": {')
    finally:
        moto_patches.undo_all()


def test_a_json_template_reads_as_moto_reads_it_and_yaml_still_goes_to_moto():
    from moto.cloudformation.models import Stack

    template = {"Resources": {"Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": {"Ref": "Name"}, "Size": 3}}}}
    yaml_template = "Resources:\n  Table:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      TableName: !Ref Name\n"
    shipped = Stack.parse_template(json.dumps(template)), Stack.parse_template(yaml_template)
    moto_patches.templates_parse_as_json()
    try:
        assert Stack.parse_template(json.dumps(template)) == shipped[0] == template
        assert Stack.parse_template(yaml_template) == shipped[1]  # CloudFormation's tags: moto's YAML path
        assert shipped[1]["Resources"]["Table"]["Properties"]["TableName"] == {"Ref": "Name"}
    finally:
        moto_patches.undo_all()


def test_a_new_sessions_loader_reuses_the_models_an_earlier_session_read():
    import botocore.session

    def model(session: Any) -> Any:
        return session.get_component("data_loader").load_service_model("dynamodb", "service-2")

    # The suite shares loaded models already (tests/conftest.py); as shipped, each session reads its own.
    shipped = pytest.MonkeyPatch()
    shipped.setattr(botocore.session, "create_loader", botocore.loaders.create_loader)
    try:
        assert model(botocore.session.Session()) is not model(botocore.session.Session())
        moto_patches.sessions_share_loaded_models()
        try:
            first, second = botocore.session.Session(), botocore.session.Session()
            assert model(first) is model(second)
            assert model(first)["metadata"]["serviceId"] == "DynamoDB"
            assert first.get_component("data_loader") is not second.get_component("data_loader")  # loaders stay apart
        finally:
            moto_patches.undo_all()
    finally:
        shipped.undo()


def _definition_in(language: str) -> str:
    """A Map in a definition of ``language`` (JSONPath or JSONata): nested scopes for the preprocessor."""
    inner = {"StartAt": "Each", "States": {"Each": {"Type": "Pass", "End": True}}}
    return json.dumps({"QueryLanguage": language, "StartAt": "Map", "States": {"Map": {"Type": "Map", "ItemProcessor": inner, "End": True}}})


def test_definitions_parsed_at_once_from_many_threads_keep_their_own_query_language():
    # moto's Preprocessor keeps its scope stack in a class attribute: without the patch's lock two
    # threads push and pop each other's scopes (a JSONPath state "downgraded" from JSONata, or the
    # wrong language on a state).
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    moto_patches.definitions_parse_once()
    found: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def parse(language: str) -> None:
        try:
            for _ in range(15):
                program, _ = AmazonStateLanguageParser.parse(_definition_in(language))
                found.append((language, program.query_language.query_language_mode.name))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=parse, args=(language,)) for language in ("JSONPath", "JSONata") * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        moto_patches.undo_all()
    assert errors == [] and len(found) == 90
    assert all(language == mode for language, mode in found)


def test_a_stop_before_the_engine_has_begun_aborts_and_an_execution_left_alone_runs_as_moto_does(monkeypatch):
    import botocore.config
    from moto.stepfunctions.parser.backend import execution_worker

    from longstep_kit.testing.wait import wait_execution

    class Clock:  # stop_execution_aborts wakes the clock's waiters of a stopped execution
        interrupted: list = []

        def interrupt(self, tag: Any) -> int:
            self.interrupted.append(tag)
            return 0

    held: list[threading.Thread] = []

    class HeldThread(threading.Thread):
        """The engine's execution thread, started only when the test says: a stop comes first."""

        def start(self) -> None:
            held.append(self)

    def history(sfn: Any, arn: str) -> list:
        described = wait_execution(sfn, arn, 60)
        events = sfn.get_execution_history(executionArn=arn)["events"]
        return [described["status"]] + [(e["type"], {k: v for k, v in e.items() if k.endswith("EventDetails")}) for e in events]

    def start_then_stop(sfn: Any, machine: str, name: str) -> str:
        arn = sfn.start_execution(stateMachineArn=machine, name=name, input='{"n": 2}')["executionArn"]
        try:
            sfn.stop_execution(executionArn=arn, error="Operator", cause="at once")
        finally:
            while held:
                threading.Thread.start(held.pop())
        return arn

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name=REGION, config=botocore.config.Config(retries={"max_attempts": 1}))
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        machine = sfn.create_state_machine(name="pick", definition=_DEFINITION, roleArn=role)["stateMachineArn"]
        as_moto = history(sfn, sfn.start_execution(stateMachineArn=machine, name="plain", input='{"n": 2}')["executionArn"])
        monkeypatch.setattr(execution_worker, "Thread", HeldThread)
        with pytest.raises(AttributeError, match="set_stop"):  # moto's own (served: an HTTP 500)
            start_then_stop(sfn, machine, "moto")
        moto_says = history(sfn, f"{machine.replace(':stateMachine:', ':execution:')}:moto")
        moto_patches.stop_execution_aborts(Clock())
        try:
            stopped = history(sfn, start_then_stop(sfn, machine, "stopped"))
            monkeypatch.undo()
            alone = history(sfn, sfn.start_execution(stateMachineArn=machine, name="alone", input='{"n": 2}')["executionArn"])
        finally:
            moto_patches.undo_all()
    assert moto_says[0] == "SUCCEEDED"  # the stop was lost
    assert alone == as_moto and as_moto[0] == "SUCCEEDED"
    assert stopped[0] == "ABORTED"
    assert [event for event, _ in stopped[1:]] == ["ExecutionStarted", "ExecutionAborted"]
    assert len(Clock.interrupted) == 1


def test_a_token_answered_while_an_execution_has_not_begun_gets_moto_s_answer_not_a_crash(monkeypatch):
    # A child run's Finish answered its parent's token while another execution had just started:
    # moto read that execution's environment, still None, and the answer failed with
    # AttributeError (seen once in a fresh clone's stop-anywhere run). With the patch the
    # unstarted execution is passed by and the answer gets moto's own reply for the token.
    import botocore.config
    from moto.stepfunctions.parser.backend import execution_worker

    held: list[threading.Thread] = []

    class HeldThread(threading.Thread):
        def start(self) -> None:
            held.append(self)

    def answer(sfn: Any) -> str:
        try:
            sfn.send_task_success(taskToken="no-such-token", output="{}")
        except Exception as exc:  # the error is the answer
            return type(exc).__name__ + ": " + str(exc)[:80]
        return "accepted"

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name=REGION, config=botocore.config.Config(retries={"max_attempts": 1}))
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        machine = sfn.create_state_machine(name="pick", definition=_DEFINITION, roleArn=role)["stateMachineArn"]
        as_moto = answer(sfn)  # no execution at all: moto's own answer
        monkeypatch.setattr(execution_worker, "Thread", HeldThread)
        sfn.start_execution(stateMachineArn=machine, name="held", input='{"n": 2}')
        with pytest.raises(AttributeError, match="callback_pool_manager"):  # moto's own, served: a 500
            sfn.send_task_success(taskToken="no-such-token", output="{}")
        moto_patches.stop_execution_aborts(type("Clock", (), {"interrupt": lambda self, tag: 0})())
        try:
            patched = answer(sfn)
        finally:
            while held:
                threading.Thread.start(held.pop())
            moto_patches.undo_all()
    assert patched == as_moto and as_moto.startswith("InvalidToken")


_PATHS = ["$", "$.run_id", "$.calls", "$.calls[0]", "$.calls[*].tool", "$.calls[1:]", "$.a.b[2]", "$.missing", "$..tool", "$.calls[?(@.call > 0)]"]
_DOCUMENT = {"run_id": "r1", "calls": [{"call": 0, "tool": "grep"}, {"call": 1, "tool": "read"}], "a": {"b": [1, 2, 3]}}


def _evaluate(path: str) -> tuple[str, Any]:
    """moto's own answer for ``path``: what extract_json returns (or the error it raises) and
    what ResultPath writes for it."""
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils.json_path import extract_json

    try:
        read: Any = extract_json(path, json.loads(json.dumps(_DOCUMENT)))
    except Exception as exc:  # the error is part of the answer
        read = f"{type(exc).__name__}: {exc}"
    try:
        written: Any = result_path.parse(path).update_or_create(json.loads(json.dumps(_DOCUMENT)), {"out": 1})
    except Exception as exc:
        written = f"{type(exc).__name__}: {exc}"
    return json.dumps(read, sort_keys=True, default=str), json.dumps(written, sort_keys=True, default=str)


def test_json_paths_parsed_once_answer_as_moto_does():
    from moto.stepfunctions.parser.asl.utils import json_path

    shipped = [_evaluate(path) for path in _PATHS]
    moto_patches.json_paths_parse_once()
    try:
        assert json_path.parse("$.calls") is json_path.parse("$.calls")  # kept...
        for _ in range(2):  # ...and the answers, the first time and from what was kept, are moto's
            assert [_evaluate(path) for path in _PATHS] == shipped
        assert any("NoSuchJsonPathError" in read for read, _ in shipped)  # a missing path still fails
        for _ in range(2):  # a path that does not parse is refused every time
            with pytest.raises(Exception):
                json_path.parse("$.[[")
    finally:
        moto_patches.undo_all()
    assert json_path.parse("$.calls") is not json_path.parse("$.calls")  # undone


def _dated_run(sfn: Any, machine: str, name: str) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """What the engine did (as ``_lambda_machine_history``), its execution's dates, its events' times."""
    from longstep_kit.testing.wait import wait_execution

    execution = sfn.start_execution(stateMachineArn=machine, name=name, input="{}")["executionArn"]
    described = wait_execution(sfn, execution, 60)
    events = sfn.get_execution_history(executionArn=execution)["events"]
    output = json.loads(described.get("output") or "{}")
    entered = output.pop("entered", None)
    # The entered time is in the last state's output and its exit event: compared apart.
    did = [described["status"], output] + [
        (e["type"], {k: v for k, v in e.items() if k.endswith("EventDetails")}) for e in events if "entered" not in json.dumps(e, default=str)
    ]
    dates = {"start": described["startDate"].timestamp(), "stop": described["stopDate"].timestamp(), "entered": entered}
    return did, dates, [e["timestamp"].timestamp() for e in events]


def test_the_engine_dates_executions_and_history_on_the_virtual_clock_and_answers_as_moto_does():
    import datetime as dt

    from moto.stepfunctions.parser.asl.eval.event import event_manager

    from longstep_kit.local.clock import EPOCH, VirtualClock

    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [{"StartAt": "B", "States": {"B": {"Type": "Pass", "Result": "b", "End": True}}}],
                "ResultPath": "$.both",
                "Next": "When",
            },
            "When": {"Type": "Pass", "Parameters": {"both.$": "$.both", "entered.$": "$$.State.EnteredTime"}, "End": True},
        },
    }
    waiting = {"StartAt": "Long", "States": {"Long": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="dates", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(name="dated", definition=json.dumps(definition), roleArn=role)["stateMachineArn"]
        as_moto, _, _ = _dated_run(sfn, machine, "plain")
        clock = VirtualClock()
        moto_patches.engine_timestamps(clock)
        try:
            first, first_dates, first_times = _dated_run(sfn, machine, "virtual-1")
            clock.advance(2 * 86400)  # no timers: time just moves
            second, second_dates, second_times = _dated_run(sfn, machine, "virtual-2")
            long_machine = sfn.create_state_machine(name="long", definition=json.dumps(waiting), roleArn=role)["stateMachineArn"]
            created = sfn.describe_state_machine(stateMachineArn=long_machine)["creationDate"].timestamp()
            started = sfn.start_execution(stateMachineArn=long_machine, name="stopped")["executionArn"]
            clock.advance(90)
            sfn.stop_execution(executionArn=started)
            from longstep_kit.testing.wait import wait_execution

            stopped = wait_execution(sfn, started, 60)
        finally:
            moto_patches.undo_all()
        assert event_manager.datetime is dt  # undone
    assert first == as_moto and second == as_moto  # the same engine, the same answers
    assert as_moto[0] == "SUCCEEDED" and as_moto[1] == {"both": ["b"]}
    assert first_dates["start"] == first_dates["stop"] == EPOCH and set(first_times) == {EPOCH}
    later = EPOCH + 2 * 86400
    assert second_dates["start"] == second_dates["stop"] == later and set(second_times) == {later}
    assert dt.datetime.fromisoformat(second_dates["entered"]).timestamp() == later
    assert created == later
    assert stopped["status"] == "ABORTED" and stopped["startDate"].timestamp() == later and stopped["stopDate"].timestamp() == later + 90
