"""``cdk destroy`` then ``cdk deploy`` again, on moto: what the stack retains is left behind, and
nothing it leaves behind stops the same stack from being created again (docs/deploy.md, Tear down)."""

from __future__ import annotations

import json

import pytest

from longstep_kit.local.stack import LocalStack

# moto's CloudFormation warns of each resource type it skips (the local stack reports them once).
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")

CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]


def _log_groups(stack: LocalStack) -> set[str]:
    pages = stack.client("logs").get_paginator("describe_log_groups").paginate()
    return {group["logGroupName"] for page in pages for group in page["logGroups"]}


def _state_machine_log_group(stack: LocalStack, name: str) -> str:
    pages = stack.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=name)
    resources = [r for page in pages for r in page["StackResourceSummaries"]]
    (group,) = [
        r["PhysicalResourceId"] for r in resources if r.get("ResourceType") == "AWS::Logs::LogGroup" and "/aws/vendedlogs/" in r["PhysicalResourceId"]
    ]
    return group


def test_the_stack_deploys_again_after_a_destroy_and_leaves_its_logs_behind():
    with LocalStack() as stack:
        name = stack.assembly.stack_name
        cfn = stack.client("cloudformation")
        first = _state_machine_log_group(stack, name)
        cfn.delete_stack(StackName=name)
        retained = _log_groups(stack)
        assert first in retained  # the logs stay for their retention period (DeletionPolicy Retain)

        cfn.create_stack(StackName=name, TemplateBody=json.dumps(stack.deployed_template), Capabilities=CAPABILITIES)
        status = cfn.describe_stacks(StackName=name)["Stacks"][0]
        assert status["StackStatus"] == "CREATE_COMPLETE", status.get("StackStatusReason")
        second = _state_machine_log_group(stack, name)
        assert second != first and second.startswith("/aws/vendedlogs/states/")
        assert {first, second} <= _log_groups(stack)
