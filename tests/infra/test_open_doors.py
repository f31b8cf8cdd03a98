"""Issue 24's open doors, in the template: who may signal, whose memories a tool reaches, what a
CheckCondition of an agent without conditions holds, and which key encrypts execution data.

Each test resolves the synthesized policies (``longstep_kit.local.iam``, the evaluator the local
stack enforces with) and asks them the question the threat table of docs/security.md names.
"""

from __future__ import annotations

from typing import Any

import pytest

from longstep.humans.api import SIGNAL_DETAIL_TYPE
from longstep_kit.constructs.signal_bus import SIGNAL_SOURCE
from longstep_kit.local import iam

from tests.local.conftest import delegate_context

from .conftest import resources_of_type

ACCOUNT, REGION = "123456789012", "us-east-1"
SIGNALLER = f"arn:aws:iam::{ACCOUNT}:role/ci-signaller"
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/admin"
# The two-agent variant (triage, which declares a condition; lead and research, which declare
# none) with a named signaller: the same context tests/local/test_isolation.py deploys.
ISOLATION = delegate_context(signal_principals=[SIGNALLER])


def _resolver(template: dict[str, Any]) -> iam.Resolver:
    """Intrinsics resolved to names a deploy would give (a table's Ref is its logical id)."""
    pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}

    def get_att(logical: str, attribute: str) -> str:
        kind = template["Resources"][logical]["Type"]
        if kind == "AWS::DynamoDB::Table":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{logical}"
        if kind == "AWS::KMS::Key":
            return f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{logical}"
        if kind == "AWS::IAM::Role":
            return f"arn:aws:iam::{ACCOUNT}:role/{logical}"
        return f"arn-of:{logical}"

    def ref(logical: str) -> str:
        if template["Resources"][logical]["Type"] == "AWS::StepFunctions::StateMachine":
            return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{logical}"
        return logical

    return iam.template_resolver(ref, get_att, pseudo, template.get("Mappings", {}))


def _policies(template: dict[str, Any]) -> iam.Policies:
    return iam.policies_from_template(template, _resolver(template), lambda logical: f"arn:aws:iam::{ACCOUNT}:role/{logical}", ACCOUNT)


def _function(template: dict[str, Any], construct_id: str) -> dict[str, Any]:
    """A function by its construct id (``CallTool-lead``), from its logical id."""
    prefix = "Agent" + construct_id.replace("-", "")
    (fn,) = [r for lid, r in resources_of_type(template, "AWS::Lambda::Function").items() if lid.startswith(prefix) and "Logs" not in lid]
    return fn


def _role_arn(fn: dict[str, Any]) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{fn['Properties']['Role']['Fn::GetAtt'][0]}"


@pytest.fixture(scope="module")
def isolation_template() -> dict[str, Any]:
    from longstep_kit.local.synth import synthesize

    return synthesize(context=ISOLATION).template


@pytest.fixture(scope="module")
def kms_template() -> dict[str, Any]:
    from longstep_kit.local.synth import synthesize

    return synthesize(context={"longstep": {"customer_managed_key": True, "workflows": {"release": "agents.release:build"}}}).template


# -- the signal path -------------------------------------------------------------------------------


def _signal_bus(template: dict[str, Any]) -> tuple[str, str]:
    ((lid, bus),) = resources_of_type(template, "AWS::Events::EventBus").items()
    return lid, f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{bus['Properties']['Name']}"


def _signal(source: str = SIGNAL_SOURCE) -> dict[str, Any]:
    return {"events:source": [source], "events:detail-type": [SIGNAL_DETAIL_TYPE]}


def test_the_signal_rule_matches_the_kits_source_on_the_kits_bus(template):
    bus_id, _ = _signal_bus(template)
    (rule,) = resources_of_type(template, "AWS::Events::Rule").values()
    assert rule["Properties"]["EventPattern"] == {"source": [SIGNAL_SOURCE], "detail-type": [SIGNAL_DETAIL_TYPE]}
    assert rule["Properties"]["EventBusName"] == {"Ref": bus_id}  # not the default bus


def test_with_no_principal_named_nobody_can_signal_not_even_an_administrator(template):
    policies = _policies(template)
    policies.roles[ADMIN] = [{"Effect": "Allow", "Action": "events:*", "Resource": "*"}]
    _, bus = _signal_bus(template)
    assert not policies.decide(ADMIN, "events:PutEvents", bus, _signal()).allowed


def test_only_the_named_principals_can_signal(isolation_template):
    policies = _policies(isolation_template)
    policies.roles[ADMIN] = [{"Effect": "Allow", "Action": "events:*", "Resource": "*"}]
    _, bus = _signal_bus(isolation_template)
    assert policies.decide(SIGNALLER, "events:PutEvents", bus, _signal()).allowed  # by the bus policy alone
    assert not policies.decide(SIGNALLER, "events:PutEvents", bus, _signal("com.example.other")).allowed  # the kit's source only
    assert not policies.decide(ADMIN, "events:PutEvents", bus, _signal()).allowed  # explicit deny beats its events:*


@pytest.mark.parametrize(
    "principal",
    ["arn:aws:iam::123456789012:root", "arn:aws:iam::12345:role/x", "role/ci", "arn:aws:sts::123456789012:assumed-role/ci/session"],
)
def test_a_bad_signal_principal_is_one_line_naming_the_key(principal):
    from longstep_kit.config import ConfigError, load_config

    with pytest.raises(ConfigError) as caught:
        load_config({"signal_principals": [principal]})
    assert "longstep.signal_principals.0" in str(caught.value) and "\n" not in str(caught.value)


# -- the memory table ------------------------------------------------------------------------------


def _memory_table(template: dict[str, Any]) -> str:
    (lid,) = [lid for lid in resources_of_type(template, "AWS::DynamoDB::Table") if lid.startswith("StorageMemory")]
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{lid}"


@pytest.mark.parametrize("action", ["dynamodb:Query", "dynamodb:PutItem"])
def test_each_agents_tool_function_reaches_its_own_memory_namespaces_only(isolation_template, action):
    policies, table = _policies(isolation_template), _memory_table(isolation_template)
    for agent, other in (("lead", "research"), ("research", "lead"), ("triage", "lead")):
        role = _role_arn(_function(isolation_template, f"CallTool-{agent}"))
        for space in (agent, f"{agent}#user#alice"):
            assert policies.decide(role, action, table, {"dynamodb:LeadingKeys": [space]}).allowed, (agent, space)
        for space in (other, f"{other}#user#alice", f"{agent}x", f"{agent}#other"):
            assert not policies.decide(role, action, table, {"dynamodb:LeadingKeys": [space]}).allowed, (agent, space)
        assert not policies.decide(role, action, table, {}).allowed  # a request naming no partition (Null: false)


# -- grants an agent does not use ------------------------------------------------------------------


def test_an_agent_without_conditions_gets_a_check_condition_function_with_no_grants(isolation_template):
    policies = _policies(isolation_template)
    for agent in ("lead", "research"):
        statements = policies.roles[_role_arn(_function(isolation_template, f"CheckCondition-{agent}"))]
        actions = {a for s in statements for a in iam.as_list(s["Action"])}
        # Its own log group and X-Ray only: no table, no world, no key.
        assert actions <= {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}, agent
    triage = policies.roles[_role_arn(_function(isolation_template, "CheckCondition-triage"))]
    assert any("dynamodb:GetItem" in iam.as_list(s["Action"]) for s in triage)  # it reads the run record and its world


# -- execution data under the customer's key -------------------------------------------------------


def test_every_state_machine_encrypts_execution_data_with_the_customer_key(kms_template):
    ((key_id, key),) = resources_of_type(kms_template, "AWS::KMS::Key").items()
    key_arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key_id}"
    policies = _policies(kms_template)
    machines = resources_of_type(kms_template, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 2  # the agent loop and the release workflow
    for lid, machine in machines.items():
        assert machine["Properties"]["EncryptionConfiguration"] == {
            "Type": "CUSTOMER_MANAGED_KMS_KEY",
            "KmsKeyId": {"Fn::GetAtt": [key_id, "Arn"]},
            "KmsDataKeyReusePeriodSeconds": 300,
        }, lid
        role = f"arn:aws:iam::{ACCOUNT}:role/{machine['Properties']['RoleArn']['Fn::GetAtt'][0]}"
        own = {"kms:EncryptionContext:aws:states:stateMachineArn": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{lid}"}
        other = {"kms:EncryptionContext:aws:states:stateMachineArn": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:Other"}
        logs = {"kms:EncryptionContext:SourceArn": f"arn:aws:logs:{REGION}:{ACCOUNT}:*"}
        for action in ("kms:Decrypt", "kms:GenerateDataKey"):
            assert policies.decide(role, action, key_arn, own).allowed, (lid, action)  # its own executions' data
            assert not policies.decide(role, action, key_arn, other).allowed, (lid, action)  # no other state machine's
        assert policies.decide(role, "kms:GenerateDataKey", key_arn, logs).allowed, lid  # log delivery
    delivery = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Principal") == {"Service": "delivery.logs.amazonaws.com"}]
    assert [s["Action"] for s in delivery] == ["kms:Decrypt"]


def test_the_default_state_machine_keeps_the_aws_owned_key(template):
    for lid, machine in resources_of_type(template, "AWS::StepFunctions::StateMachine").items():
        assert "EncryptionConfiguration" not in machine["Properties"], lid


def test_every_test_the_security_threat_table_names_exists():
    import re

    from .conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "security.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(named) >= 15
    for path, name in named:
        source = (REPO_ROOT / path).read_text()
        assert not name or re.search(rf"^def {name}\(", source, re.M), f"{path}::{name}"
