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


async def _drive(url, payloads, stop_second):
    from mcp import Client as McpClient

    async with McpClient(url) as mcp:
        names = {t.name for t in (await mcp.list_tools()).tools}
        first, second = payloads
        started = _tool(await mcp.call_tool("start_run", first))
        decided, seen, after = [], [], -1
        for _ in range(ROUNDS):
            page = _tool(await mcp.call_tool("run_events", {"run_id": first["run_id"], "after": after, "wait_seconds": 2}))
            seen += page["events"]
            after = page["next_after"]
            for event in page["events"]:
                if event["type"] == ev.APPROVAL_REQUESTED:
                    pending = _tool(await mcp.call_tool("list_approvals", {"run_id": first["run_id"]}))["approvals"]
                    assert event["approval_id"] in [p["approval_id"] for p in pending]
                    _tool(await mcp.call_tool("decide_approval", {"approval_id": event["approval_id"], "decision": "approve"}))
                    decided.append(event["approval_id"])
            if page["status"] != "RUNNING" and not page["events"]:
                break
        status = _tool(await mcp.call_tool("run_status", {"run_id": first["run_id"]}))["status"]
        second_started = _tool(await mcp.call_tool("start_run", second))
        # Stop once the run exists (Init has written its record: its first event): a stop before
        # that is refused with "no run named", as `longstep stop` refuses it.
        for _ in range(ROUNDS):
            page = _tool(await mcp.call_tool("run_events", {"run_id": second["run_id"], "after": -1, "wait_seconds": 2}))
            if page["events"]:
                break
        assert page["events"], second_started
        stopped = _tool(await mcp.call_tool("stop_run", {"run_id": second["run_id"], "reason": "not needed"}))
        ended, second_events = None, []
        for _ in range(ROUNDS):
            page = _tool(await mcp.call_tool("run_events", {"run_id": second["run_id"], "after": -1, "wait_seconds": 2}))
            second_events = page["events"]
            if page["status"] != "RUNNING":
                ended = page["status"]
                break
        return names, started, decided, seen, status, stopped, ended, second_events


def test_an_mcp_client_runs_a_run_through_its_approvals_and_stops_another(stack, triage, mcp_url):
    check_and_seed(stack, triage, triage.name)
    payloads = [start_input(stack, triage, "mcp-first"), start_input(stack, triage, "mcp-second")]
    with stack.clock.held():  # the approver is a client: the virtual clock must not skip to the approvals' timeout
        names, started, decided, seen, status, stopped, ended, second = asyncio.run(_drive(mcp_url, payloads, True))
    assert names == {"start_run", "run_status", "run_events", "list_approvals", "decide_approval", "send_message", "stop_run"}
    assert started["run_id"] == "mcp-first" and started["execution"].startswith("arn:aws:states:")
    assert len(decided) == 2  # triage.json asks twice
    assert [e["offset"] for e in seen] == list(range(len(seen)))
    assert seen[-1]["type"] == ev.RUN_FINISHED and status == "SUCCEEDED"
    assert stopped["stopped"] and ended is not None
    assert any(e["type"] == ev.RUN_STOPPED for e in second)
