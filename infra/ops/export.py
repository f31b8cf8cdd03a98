"""Export a run: its whole transcript, its artifacts, and its model replies as a script.

The export is a scenario file (``events/scenarios`` format) with the recorded run attached, so
the local stack can replay it as a scripted run: ``longstep local run export.json``. The
``recorded`` part also holds what ``longstep replay`` checks today's code against: every model
reply and tool result as recorded, the code version the run started on and its tools' effect
classes.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import keys
from longstep.contract.run import RunRecord
from longstep.artifacts import ARTIFACT_SCHEME, ArtifactStore
from longstep.errors import InvalidInputError
from longstep.messages import text_of, tool_uses, transcript_sha256
from longstep.store import CheckpointStore
from longstep.transcript import transcript
from longstep_kit.ops.fork import lineage_steps


def export_run(store: CheckpointStore, artifacts: ArtifactStore, run_id: str) -> dict[str, Any]:
    """Everything recorded of ``run_id``, as a replayable scenario.

    Raises:
        InvalidInputError: no such run.
    """
    stored = store.get(run_id, keys.RUN_RECORD)
    if stored is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    record = RunRecord.from_dict(stored)
    steps = lineage_steps(store, run_id)  # a fork's shared turns too: the export is the whole run
    replies: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for step in steps:
        key = keys.parse(step.sk)
        if step.kind == "model":
            replies[str(key.turn)] = {k: step.result[k] for k in ("message", "stop_reason", "usage", "provider_stop") if k in step.result}
        else:
            results[f"{key.turn}:{key.call}"] = step.result
    messages = transcript(record, steps)
    turns: dict[str, Any] = {}
    for step in steps:
        if step.kind != "model":
            continue
        message = step.result["message"]
        turn: dict[str, Any] = {}
        if text_of(message):
            turn["text"] = text_of(message)
        calls = [{"name": u["name"], "input": u["input"], "id": u["toolUseId"]} for u in tool_uses(message)]
        if calls:
            turn["tool_calls"] = calls
        usage = step.result.get("usage", {})
        turn.update({k: usage[v] for k, v in (("input_tokens", "inputTokens"), ("output_tokens", "outputTokens")) if v in usage})
        turns[str(keys.parse(step.sk).turn)] = turn
    return {
        "name": run_id,
        "description": f"exported from run {run_id}",
        "input": {"goal": record.goal, "agent": record.agent, "max_turns": int(record.max_turns or 0)},
        "turns": turns,
        "recorded": {
            "transcript": messages,
            "transcript_sha256": transcript_sha256(messages),
            "artifacts": _artifacts(artifacts, messages),
            "code_version": record.code_version,
            "tool_effects": record.tool_effects,
            "replies": replies,
            "tool_results": results,
        },
    }


def _artifacts(artifacts: ArtifactStore, messages: list[dict[str, Any]]) -> dict[str, str]:
    """The content of every artifact the transcript refers to, by uri."""
    text = json.dumps(messages)
    out: dict[str, str] = {}
    start = 0
    while (found := text.find(ARTIFACT_SCHEME, start)) != -1:
        uri = text[found : found + len(ARTIFACT_SCHEME) + 64]
        start = found + len(uri)
        if uri not in out:
            out[uri] = artifacts.get(uri).decode("utf-8", errors="replace")
    return out
