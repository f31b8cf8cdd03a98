"""Init: validate the start input, create the run (or attach to it) and find where to resume."""

from __future__ import annotations

import json
from typing import Any

from longstep import clock
from longstep import context, events, keys, memory, outputs, runs_index
from longstep.code_version import code_parts, code_version, tool_effects
from longstep.errors import RunConflictError
from longstep.inputs import StartInput, parse_model
from longstep.mcp import catalog as mcp_catalog
from longstep.contract.run import EVAL
from longstep.contract.steps import InitOutput
from longstep.runtime import Runtime
from longstep.store import AlreadyRecordedError
from longstep.tasks.common import load_run


def start_run(rt: Runtime, event: Any) -> InitOutput:
    """Init: validate the start input, create the run (or attach to it) and find where to resume.

    Raises:
        InvalidInputError: a field of the start input is malformed (the message names it).
        UnknownAgentError: the agent is not registered.
        RunConflictError: the run id exists with another agent or goal.
    """
    start = parse_model(StartInput, _without_escalation(event), "start input")
    agent = rt.resolve_agent(start.agent)  # an unknown agent fails here, before anything is written
    parts = code_parts(agent)
    record = {
        "agent": start.agent,
        "goal": start.goal,
        "model": start.model.model_dump(),
        "max_turns": start.max_turns or rt.settings.max_turns,
        "turns_per_execution": start.turns_per_execution or rt.settings.turns_per_execution,
        "memory_namespace": memory.namespace(start.agent, start.user),
        # Read once: every model call of the run, and every replay, sees the same memories.
        "memories": _load_memories(rt, memory.namespace(start.agent, start.user)),
        "created_at": clock.now(),
        outputs.IDENTITY_FIELD: outputs.new_identity(),  # this run, not an earlier one of its id
        # The code the run started on (a resumed run keeps the version it was created with).
        "code_version": code_version(parts),
        "code_parts": parts,
        # How each tool stayed safe when the run started: a deploy that changes it is a divergence
        # ``longstep replay`` reports.
        "tool_effects": tool_effects(agent),
    }
    record.update(mcp_catalog.start_fields(rt, start.run_id, agent))  # the MCP tools the run sees
    if start.parent is not None:  # a subagent's run: Finish answers the parent's waiting call
        record["parent"] = json.dumps(start.parent.model_dump())
    if start.deadline is not None:  # no model turn starts after it (tasks/model_turn.py)
        record["deadline"] = str(start.deadline.timestamp())
    if start.tenant is not None:  # fleet attributes (longstep.runs_index)
        record["tenant"] = start.tenant
    if start.tags:
        record["tags"] = start.tags
    if start.budget is not None:  # longstep.budget: checked before each new model call
        record["budget"] = start.budget.model_dump(exclude_none=True)
    if start.eval is not None:  # an eval run: CallTool answers its calls without acting (longstep.evals)
        record[EVAL] = json.dumps(start.eval.model_dump(), sort_keys=True)
    resumed = False
    try:
        rt.store.put_once(start.run_id, keys.RUN_RECORD, record)
    except AlreadyRecordedError:
        existing = load_run(rt, start.run_id)
        for name, was in (("agent", existing.agent), ("goal", existing.goal)):
            if was != record[name]:
                raise RunConflictError(f"run {start.run_id} exists with a different {name}: {was!r} != {record[name]!r}") from None
        if start.eval is not None and existing.eval != start.eval.model_dump():
            # An eval start never attaches to a run of another kind: it would go on acting.
            raise RunConflictError(f"run {start.run_id} exists and is not this eval run; an eval needs a new run id") from None
        resumed = True
        if record.get(mcp_catalog.RUN_FIELD):  # a resume or the next execution: has a server's catalog changed?
            mcp_catalog.report_changes(rt, start.run_id, existing.mcp_catalog, json.loads(record[mcp_catalog.RUN_FIELD]))
    next_turn = context.resume_point(rt.store, rt.artifacts, start.run_id, existing) if resumed else 0
    runs_index.on_start(rt.store, start.run_id, existing if resumed else record, start.generation, resumed)
    rt.events.known(start.run_id)
    if not resumed:
        rt.events.emit(start.run_id, events.RUN_STARTED, agent=start.agent, goal=start.goal, parent=record.get("parent") and start.parent.run_id)
    elif start.generation == 0:  # a later generation's start was said by ContinueAsNew (run.continued)
        rt.events.emit(start.run_id, events.RUN_RESUMED, next_turn=next_turn)
    return {
        "run_id": start.run_id,
        "next_turn": next_turn,
        "resumed": resumed,
        "resolution": None,
        "generation": start.generation,
        "generation_start": next_turn,
    }


def _load_memories(rt: Runtime, space: str) -> list[dict[str, str]]:
    store = rt.memory()
    return [] if store is None else [{"key": m["key"], "value": m["value"]} for m in store.all(space)[: memory.PROMPT_MEMORIES]]


def _without_escalation(event: Any) -> Any:
    """The start input, without what an escalation of Init added to it (the caught ``error``, the
    human's ``resolution``): a human's retry enters Init again with both."""
    if isinstance(event, dict) and isinstance(event.get("resolution"), dict) and isinstance(event.get("error"), dict):
        return {k: v for k, v in event.items() if k not in ("error", "resolution")}
    return event
