"""Issue 24's open doors, on the local stack with IAM enforced: one agent's tool code cannot reach
another's memories, only a named principal can put signals on the signal bus, and the
CheckCondition function of an agent without conditions works with no grants at all.

The stack serves three agents (triage declares a condition; lead and research declare none) and
names one signaller (``longstep.signal_principals``): tests/infra/test_open_doors.py checks the
same template's policies; here the calls are made and refused as AWS would refuse them.
"""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from longstep import clients
from longstep.memory import MemoryStore
from longstep.resources import ENV_AGENT
from longstep_kit.constructs.signal_bus import SIGNAL_SOURCE
from longstep_kit.local import iam
from longstep_kit.local.stack import LocalStack

from tests.local.conftest import delegate_context

SIGNALLER = "arn:aws:iam::123456789012:role/ci-signaller"
INTRUDER = "arn:aws:iam::123456789012:role/intruder"


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context=delegate_context(signal_principals=[SIGNALLER])) as local:
        yield local


def _agent_function(stack, handler: str, agent: str) -> dict:
    functions = stack.client("lambda").list_functions()["Functions"]
    (fn,) = [
        f
        for f in functions
        if f["Handler"] == f"longstep_functions.{handler}.lambda_handler" and f["Environment"]["Variables"].get(ENV_AGENT) == agent
    ]
    return fn


def _denied(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_an_agents_call_tool_cannot_read_or_write_another_agents_memories(stack):
    table = stack.outputs["MemoryTableName"]
    # The lead agent remembered facts, for every user and for alice (written as the lead's tool function).
    with iam.acting_as(_agent_function(stack, "call_tool", "lead")["Role"]):
        lead = MemoryStore(table, clients.client("dynamodb"))
        lead.put("lead", "budget", "40k", "run-lead-1")
        lead.put("lead#user#alice", "style", "short answers", "run-lead-2")
        assert [m["key"] for m in lead.all("lead#user#alice")] == ["style"]
    with iam.acting_as(_agent_function(stack, "call_tool", "research")["Role"]):
        research = MemoryStore(table, clients.client("dynamodb"))
        research.put("research", "source", "arxiv", "run-research-1")  # its own namespace: granted
        assert [m["key"] for m in research.all("research")] == ["source"]
        for space in ("lead", "lead#user#alice"):
            assert _denied(lambda: research.all(space)) == "AccessDeniedException", space  # recall
            assert _denied(lambda: research.put(space, "budget", "0", "run-research-1")) == "AccessDeniedException", space  # remember
        scan = lambda: clients.client("dynamodb").scan(TableName=table)  # noqa: E731 - never granted
        assert _denied(scan) == "AccessDeniedException"
    assert [m["value"] for m in MemoryStore(table, stack.client("dynamodb")).all("lead")] == ["40k"]  # nothing overwritten


def test_only_a_named_principal_can_put_events_on_the_signal_bus(stack):
    bus = stack.outputs["SignalBusName"]
    entry = {"EventBusName": bus, "Source": SIGNAL_SOURCE, "DetailType": "Longstep Probe", "Detail": json.dumps({"run_id": "none"})}
    # An intruder whose own policy allows every EventBridge action: the bus's explicit Deny wins.
    stack.enforcement.allow_role(INTRUDER, [{"Effect": "Allow", "Action": "events:*", "Resource": "*"}])
    with iam.acting_as(INTRUDER):
        assert _denied(lambda: clients.client("events").put_events(Entries=[entry])) == "AccessDeniedException"
    with iam.acting_as(_agent_function(stack, "call_tool", "triage")["Role"]):  # a function of the stack is no signaller either
        assert _denied(lambda: clients.client("events").put_events(Entries=[entry])) == "AccessDeniedException"
    with iam.acting_as(SIGNALLER):  # allowed by the bus policy alone (it holds no identity policy here)
        assert clients.client("events").put_events(Entries=[entry])["FailedEntryCount"] == 0
        other = {**entry, "Source": "com.example.ci"}  # the kit's source only
        assert _denied(lambda: clients.client("events").put_events(Entries=[other])) == "AccessDeniedException"


def test_a_check_condition_without_conditions_answers_with_no_grants(stack):
    fn = _agent_function(stack, "check_condition", "lead")
    item = {"run_id": "lead-cond-1", "turn": 1, "call": 0, "tool": "wait_for", "wait": "condition", "condition": "ticket_status"}
    response = stack.client("lambda").invoke(FunctionName=fn["FunctionArn"], Payload=json.dumps({"item": item, "execution": "lead-cond-1"}))
    answer = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, answer
    assert answer == {
        "done": True,
        "met": False,
        "handover": False,
        "waited": 0,
        "error": "condition: unknown condition 'ticket_status'; known: none",
    }
    with iam.acting_as(fn["Role"]):  # and it could not have read the run record
        key = {"pk": {"S": "lead-cond-1"}, "sk": {"S": "run"}}
        assert (
            _denied(lambda: clients.client("dynamodb").get_item(TableName=stack.outputs["CheckpointTableName"], Key=key)) == "AccessDeniedException"
        )
