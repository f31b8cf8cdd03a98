"""The four storage systems, each ``run(session, meter) -> dict`` on an active moto mock.

Every ``run`` records the whole session, returns what it stored (:func:`bench.storage.aws.inventory`)
and then measures a resume at the last turn with a :class:`bench.storage.aws.Meter`.
"""

SYSTEMS = ("full_snapshot", "langgraph", "langgraph_delta", "longstep")

LABELS = {
    "full_snapshot": "Full snapshot per step",
    "langgraph": "LangGraph add_messages + DynamoDBSaver",
    "langgraph_delta": "LangGraph DeltaChannel(snapshot_frequency=50) + DynamoDBSaver",
    "longstep": "Longstep (real runtime)",
}


def runner(name: str):
    """The ``run`` function of system ``name`` (imported lazily: LangGraph is heavy)."""
    if name == "full_snapshot":
        from bench.storage.systems.full_snapshot import run
    elif name == "langgraph":
        from bench.storage.systems.langgraph_saver import run_plain as run
    elif name == "langgraph_delta":
        from bench.storage.systems.langgraph_saver import run_delta as run
    elif name == "longstep":
        from bench.storage.systems.longstep_runtime import run
    else:
        raise ValueError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}")
    return run
