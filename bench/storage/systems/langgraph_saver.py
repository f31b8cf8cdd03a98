"""LangGraph with ``DynamoDBSaver`` (langgraph-checkpoint-aws): plain ``add_messages`` and DeltaChannel.

The graph is the usual tool loop: ``agent`` (replays the session's model message as an
``AIMessage`` with ``tool_calls``) -> ``tools`` (one ``ToolMessage`` per call, the session's
output) -> ``agent`` ... -> END on the final answer. One ``invoke`` runs the whole session, as an
agent run would. The state is ``messages`` with either

* ``Annotated[list[AnyMessage], add_messages]`` (the usual state: every checkpoint carries the
  whole list), or
* ``Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=50)]``
  (checkpoints carry only the writes, with a full ``_DeltaSnapshot`` every 50 updates).

``DynamoDBSaver`` uses one table (``PK``/``SK`` strings) and offloads payloads above 350 KB to the
S3 bucket given in ``s3_offload_config``; everything else is the saver's defaults (no compression,
no TTL). The run uses ``durability="sync"`` so moto is driven from one thread; it stores the same
records as the default ``"async"`` mode, only not in the background.

Resume at the last turn: a fresh saver (new clients) and ``graph.get_state(config)`` at the
checkpoint the final model call starts from (the parent of the thread's final checkpoint), which
loads that checkpoint and, for DeltaChannel, walks its ancestors back to the last snapshot.
"""

from typing import Annotated, Any, TypedDict

import boto3

from bench.storage import fastmoto
from bench.storage.aws import REGION, Meter, create_table, inventory
from bench.storage.session import Session

TABLE = "langgraph-checkpoints"
BUCKET = "langgraph-checkpoints-bench"
THREAD = "bench-run"
SNAPSHOT_FREQUENCY = 50


def _state_types() -> tuple[Any, Any, str | None]:
    from langchain_core.messages import AnyMessage
    from langgraph.graph.message import add_messages

    class PlainState(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    try:
        from langgraph.channels.delta import DeltaChannel
        from langgraph.graph.message import _messages_delta_reducer
    except ImportError as exc:  # older langgraph: no DeltaChannel
        return PlainState, None, f"DeltaChannel is not in the installed langgraph ({exc})"

    class DeltaState(TypedDict):
        messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=SNAPSHOT_FREQUENCY)]

    return PlainState, DeltaState, None


def build_graph(session: Session, state_type: Any, checkpointer: Any) -> Any:
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph

    def agent(state: Any) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        t = session.turns[turn]
        calls = [{"name": c.name, "args": c.input, "id": c.id, "type": "tool_call"} for c in t.calls]
        return {"messages": [AIMessage(id=f"ai-{turn:05d}", content=t.text, tool_calls=calls)]}

    def tools(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        turn = int(last.id.split("-")[1])
        calls = session.turns[turn].calls
        return {"messages": [ToolMessage(id=f"tool-{turn:05d}-{i}", content=c.output, tool_call_id=c.id, name=c.name) for i, c in enumerate(calls)]}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(state_type)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def _saver(meter: Meter) -> Any:
    from langgraph_checkpoint_aws import DynamoDBSaver

    session = meter.attach_session(boto3.Session(region_name=REGION))
    return DynamoDBSaver(table_name=TABLE, session=session, region_name=REGION, s3_offload_config={"bucket_name": BUCKET})


def _run(session: Session, meter: Meter, delta: bool) -> dict[str, Any]:
    plain_state, delta_state, missing = _state_types()
    if delta and delta_state is None:
        return {"unavailable": missing}

    ddb = boto3.client("dynamodb")
    s3 = boto3.client("s3")
    create_table(ddb, TABLE, "PK", "SK")
    s3.create_bucket(Bucket=BUCKET)
    if not delta:
        fastmoto.keep_recent_bodies(BUCKET)  # GBs of old checkpoints: count them, do not keep them

    result = record_and_resume(session, delta_state if delta else plain_state, lambda: _saver(meter), meter, [TABLE], [BUCKET])
    checkpoints = ddb.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"CHECKPOINT_{THREAD}"}},
        Select="COUNT",
    )["Count"]
    result["details"] = {"checkpoints": checkpoints, "snapshot_frequency": SNAPSHOT_FREQUENCY if delta else None}
    return result


def record_and_resume(session: Session, state_type: Any, make_saver: Any, meter: Meter, tables: list[str], buckets: list[str]) -> dict[str, Any]:
    """The session run through the graph with a saver of ``make_saver()`` (one ``invoke``), what
    it stored in ``tables`` and ``buckets``, and a resume at the last turn with a new saver.
    ``bench/langgraph/storage.py`` runs it with Longstep's saver."""
    from langchain_core.messages import HumanMessage

    saver = make_saver()
    graph = build_graph(session, state_type, saver)
    config = {"configurable": {"thread_id": THREAD}, "recursion_limit": 4 * len(session.turns) + 10}
    final = graph.invoke({"messages": [HumanMessage(id="goal", content=session.goal)]}, config, durability="sync")
    expected = 1 + sum(1 + len(t.calls) for t in session.turns)
    if len(final["messages"]) != expected:
        raise AssertionError(f"LangGraph run ended with {len(final['messages'])} messages, expected {expected}")
    run_requests = meter.snapshot()

    stored = inventory(boto3.client("dynamodb"), boto3.client("s3"), tables, buckets)

    # Resume at the last turn: the checkpoint the final model call starts from (the parent of the
    # final one; a finished thread's last checkpoint is not what a crash leaves behind).
    resume_config = saver.get_tuple({"configurable": {"thread_id": THREAD}}).parent_config
    meter.reset()
    fresh = build_graph(session, state_type, make_saver())
    snapshot = fresh.get_state(resume_config)
    cost = meter.snapshot()
    restored = snapshot.values.get("messages", [])
    last_tools = session.turns[-2].calls
    if len(restored) != expected - 1 or restored[-1].content != last_tools[-1].output or snapshot.next != ("agent",):
        raise AssertionError(f"LangGraph resume rebuilt {len(restored)} messages (next {snapshot.next}), expected {expected - 1}")
    return {"stored": stored, "resume": cost, "run_requests": run_requests}


def run_plain(session: Session, meter: Meter) -> dict[str, Any]:
    return _run(session, meter, delta=False)


def run_delta(session: Session, meter: Meter) -> dict[str, Any]:
    return _run(session, meter, delta=True)
