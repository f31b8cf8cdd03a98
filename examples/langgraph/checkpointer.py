"""A LangGraph graph whose checkpoints Longstep stores: DynamoDB, and S3 for large values."""

import boto3

from longstep.langgraph import LongstepSaver


def make_saver(table_name: str, bucket: str, region: str = "us-east-1") -> LongstepSaver:
    """A saver on a table of Longstep's checkpoint layout (the stack's checkpoint table, or one made
    with ``LongstepSaver.create_table``) and a bucket for values over 64 KB once compressed."""
    return LongstepSaver(
        table_name,
        dynamodb=boto3.client("dynamodb", region_name=region),
        bucket=bucket,
        s3=boto3.client("s3", region_name=region),
    )


def chat_graph(saver: LongstepSaver):
    """A one-node chat graph compiled with the saver (needs the ``langgraph`` package)."""
    from langgraph.graph import START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict:
        return {"messages": [("ai", f"you said: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def talk(graph, thread_id: str, text: str) -> list[str]:
    """One turn of a thread: the graph resumes from the thread's newest checkpoint, wherever it ran."""
    config = {"configurable": {"thread_id": thread_id}}
    state = graph.invoke({"messages": [("human", text)]}, config)
    return [m.content for m in state["messages"]]
