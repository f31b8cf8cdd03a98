"""``longstep mcp`` on the local stack, driven by the SDK's MCP client over streamable HTTP on
127.0.0.1: a run started, followed, its approvals decided and its result read through the tools;
a second run stopped."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from longstep import events as ev
from longstep_kit.client import Client
from longstep_kit.local.runner import start_input
from longstep_kit.local.world import check_and_seed
from longstep_kit.mcp_server import build_server, http_server
from longstep_kit.testing import wait_until

ROUNDS = 200  # each a run_events call waiting at most 2 s: a bound, never reached by a passing run


@pytest.fixture(scope="module")
def mcp_url(stack):
    client = Client(
        stack.client("stepfunctions"),
        stack.client("dynamodb"),
        stack.state_machine_arn,
        stack.outputs["CheckpointTableName"],
        stack.outputs["ApprovalsTableName"],
        who="mcp-test",
    )
    server, url = http_server(build_server(client))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "longstep mcp did not start within 10 s"
        time.sleep(0.02)
    yield url
    server.should_exit = True
    thread.join(timeout=10)


def _tool(result):
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


async def _stop_a_second_run(url, second):
    from mcp import Client as McpClient

    async with McpClient(url) as mcp:
        names = {t.name for t in (await mcp.list_tools()).tools}
        started = _tool(await mcp.call_tool("start_run", second))
        # Stop once the run exists (Init has written its record: its first event): a stop before
        # that is refused with "no run named", as `longstep stop` refuses it.
        for _ in range(ROUNDS):
            page = _tool(await mcp.call_tool("run_events", {"run_id": second["run_id"], "after": -1, "wait_seconds": 2}))
            if page["events"]:
                break
        assert page["events"], started
        stopped = _tool(await mcp.call_tool("stop_run", {"run_id": second["run_id"], "reason": "not needed"}))
        ended, events = None, []
        for _ in range(ROUNDS):
            page = _tool(await mcp.call_tool("run_events", {"run_id": second["run_id"], "after": -1, "wait_seconds": 2}))
            events = page["events"]
            if page["status"] != "RUNNING":
                ended = page["status"]
                break
        return names, stopped, ended, events


def test_an_mcp_client_runs_a_run_through_its_approvals_and_stops_another(stack, triage, mcp_url):
    check_and_seed(stack, triage, triage.name)
    payloads = [start_input(stack, triage, "mcp-first"), start_input(stack, triage, "mcp-second")]
    from tests.unit.test_examples import load_example

    example = load_example("examples/mcp_agent/drive_runs.py")
    with stack.clock.held():  # the approver is a client: the virtual clock must not skip to the approvals' timeout
        first = asyncio.run(example.run_to_the_end(mcp_url, payloads[0]))
        names, stopped, ended, second = asyncio.run(_stop_a_second_run(mcp_url, payloads[1]))
    assert names == {"start_run", "run_status", "run_events", "list_approvals", "decide_approval", "send_message", "stop_run"}
    assert len(first["decided"]) == 2  # triage.json asks twice
    seen = first["events"]
    assert [e["offset"] for e in seen] == list(range(len(seen)))
    assert seen[-1]["type"] == ev.RUN_FINISHED and first["status"] == "SUCCEEDED"
    assert [e["decision"] for e in seen if e["type"] == ev.APPROVAL_DECIDED] == ["approve", "approve"]  # the run took both
    assert stopped["stopped"] == ["mcp-second"] and ended is not None
    assert any(e["type"] == ev.RUN_STOPPED for e in second)


def test_a_tasks_client_gets_a_run_as_a_task_answers_its_approvals_and_cancels_another(stack, triage, mcp_url):
    # The client side is Longstep's own (longstep.mcp.client: the SDK's session with the extension).
    from longstep import McpServer
    from longstep.mcp import client as tasks_client

    server = McpServer("longstep", url=mcp_url, tools={"start_run": None})
    check_and_seed(stack, triage, triage.name)
    first, second = start_input(stack, triage, "task-first"), start_input(stack, triage, "task-second")
    states, answered = [], 0
    with stack.clock.held():
        task = tasks_client.call_tool(server, "start_run", first, {})["task"]
        assert task["taskId"] == "task-first" and task["status"] in ("working", "input_required")
        deadline = time.monotonic() + 120
        while task["status"] not in ("completed", "failed", "cancelled"):
            assert time.monotonic() < deadline, f"the run's task did not end: {task}"
            states.append(task["status"])
            for key in task.get("inputRequests") or {}:  # each waiting approval: an elicitation, accepted
                tasks_client.update_task(server, task["taskId"], {key: {"action": "accept", "content": {"decision": "approve"}}})
                answered += 1
            time.sleep(0.1)
            task = tasks_client.get_task(server, "task-first")
        cancelled = tasks_client.call_tool(server, "start_run", second, {})["task"]
        wait_until(
            "the second run's record",
            lambda: tasks_client.get_task(server, "task-second")["status"] != "working" or _has_events(stack, "task-second"),
        )
        tasks_client.cancel_task(server, cancelled["taskId"])
        wait_until(
            "the second run's end", lambda: tasks_client.get_task(server, "task-second")["status"] not in ("working", "input_required"), timeout=60
        )
    assert task["status"] == "completed" and "Summary" in task["result"]["content"][0]["text"]
    assert "input_required" in states and answered == 2  # triage.json's two approvals, answered as elicitations
    assert tasks_client.get_task(server, "task-second")["status"] == "cancelled"


def _has_events(stack, run_id):
    from longstep.events import EventLog
    from longstep.store import CheckpointStore

    return bool(EventLog(CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))).read(run_id, -1))


def test_a_bad_request_is_one_line_naming_the_field(mcp_url):
    from mcp import Client as McpClient

    async def ask():
        async with McpClient(mcp_url) as mcp:
            unknown = await mcp.call_tool("run_status", {"run_id": "no-such-run"})
            bad = await mcp.call_tool("start_run", {"run_id": "has spaces", "agent": "triage", "goal": "x"})
            return unknown, bad

    unknown, bad = asyncio.run(ask())
    assert unknown.is_error and "run_id: no execution named 'no-such-run'" in unknown.content[0].text
    assert bad.is_error and "invalid start input: run_id:" in bad.content[0].text and "1-64 characters" in bad.content[0].text
    assert all("\n" not in r.content[0].text and "Traceback" not in r.content[0].text for r in (unknown, bad))
