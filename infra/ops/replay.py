"""Replay an exported run against today's code: the gate before a deploy.

A run that waits while new code is deployed continues on that code: its recorded steps are
replayed, and every tool call it recorded is, as far as the new code can tell, a call it made.
``replay_export`` takes a ``longstep export`` file and re-executes the run in process, on an
in-memory checkpoint table: Init and every ModelTurn run the current runtime and agent (context
building, stop-reason judging, the verifier, routing) with the model's recorded replies, and each
tool call gets its recorded result instead of running. Nothing reaches AWS or the agent's systems.

A divergence is anything an in-flight run would meet differently on the new code:

- the agent is gone;
- a tool the record calls no longer exists, or its recorded arguments no longer validate;
- a tool's effect class or approval flag changed (a keyed call that is now at-most-once, say);
- the current code routes a turn differently (ends the run early, asks for other calls);
- the rebuilt transcript differs from the recorded one (a verifier or a correction changed).

Calls the model got wrong when they were recorded (an unknown tool, bad arguments) are not held
against the new code: they never ran. Correction budgets are not enforced in a replay (a human
may have reset them). Exports written before effect classes were recorded skip that check, and
say so in the notes.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep import context, keys
from longstep.agent import Agent
from longstep.artifacts import ARTIFACT_SCHEME, ArtifactStore
from longstep.errors import InvalidInputError, LongstepError, ModelError
from longstep.inmemory import InMemoryStore
from longstep.contract.cursor import Route
from longstep.messages import Message, tool_uses, transcript_sha256
from longstep.models.base import ModelReply
from longstep.models.scripted import ScriptedProvider, parse_script
from longstep.runtime import Runtime
from longstep.settings import Settings
from longstep.steps import NoLock
from longstep.tasks.model_turn import model_turn
from longstep.tasks.init_run import start_run
from longstep.transcript import transcript

# Errors the runtime recorded for a model's own mistakes: such a call never ran.
MODEL_MISTAKES = ("UnknownToolError", "ToolArgumentsError")


@dataclass
class ReplayReport:
    """The outcome of replaying one export.

    Attributes:
        name: the exported run.
        turns: model turns re-executed.
        calls: tool calls checked.
        divergences: what the current code does differently (empty: the export replays).
        notes: what could not be checked, and why.
        recorded_code_version: the code version the run started on (None: not recorded).
    """

    name: str
    turns: int = 0
    calls: int = 0
    divergences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    recorded_code_version: str | None = None

    @property
    def ok(self) -> bool:
        """True when nothing diverged."""
        return not self.divergences

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "turns": self.turns,
            "calls": self.calls,
            "divergences": self.divergences,
            "notes": self.notes,
            "recorded_code_version": self.recorded_code_version,
        }


class ExportArtifacts(ArtifactStore):
    """The export's artifacts, in memory; what the replay writes (snapshots) stays in memory too."""

    def __init__(self, contents: dict[str, str]) -> None:
        super().__init__("replay", None)
        self._data = {uri: text.encode("utf-8") for uri, text in contents.items()}

    def put(self, data: bytes, content_type: str = "application/json") -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        self._data[f"{ARTIFACT_SCHEME}{digest}"] = data
        return {"uri": f"{ARTIFACT_SCHEME}{digest}", "sha256": digest, "bytes": len(data)}

    def get(self, uri: str) -> bytes:
        if uri not in self._data:
            raise InvalidInputError(f"recorded.artifacts: the export holds no artifact {uri}")
        return self._data[uri]


class RecordedModel:
    """The model of a replay: each turn's recorded reply (the export's script when an older export
    has no recorded replies)."""

    def __init__(self, replies: dict[str, Any], turns: dict[str, Any]) -> None:
        self.replies = replies
        self.script = ScriptedProvider(parse_script({"turns": turns}))

    def converse(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]], turn: int) -> ModelReply:
        if str(turn) in self.replies:
            return ModelReply.from_record(self.replies[str(turn)])
        return self.script.converse(system=system, messages=messages, tools=tools, turn=turn)

    def summarize(self, *, previous: str | None, outline: str, turn: int) -> str:
        return self.script.summarize(previous=previous, outline=outline, turn=turn)


def replay_export(exported: dict[str, Any], resolve_agent: Callable[[str], Agent], *, unfinished: bool = False) -> ReplayReport:
    """Re-execute an exported run on the current code and report every divergence.

    Args:
        unfinished: the run stopped before its end (failed, stopped: the redrive gate of
            ``longstep_kit.ops.bulk``): its last turn's calls with no result have not run yet, and
            the current code going on past the record is what a redrive will do, not a divergence.

    Raises:
        InvalidInputError: the export lacks a field a replay needs (the message names it).
    """
    for name in ("name", "input", "turns", "recorded"):
        if name not in exported:
            raise InvalidInputError(f"{name}: not a `longstep export` file (no {name!r})")
    recorded = exported["recorded"]
    report = ReplayReport(name=str(exported["name"]), recorded_code_version=recorded.get("code_version"))
    try:
        agent = resolve_agent(exported["input"]["agent"])
    except LongstepError as exc:
        report.divergences.append(f"agent: {exc}")
        return report
    results = recorded.get("tool_results") or _results_from_transcript(recorded.get("transcript") or [])
    effects = recorded.get("tool_effects")
    if effects is None:
        report.notes.append("the export records no effect classes (exported before they were recorded): not checked")
    rt = _runtime(recorded, exported["turns"], agent)
    run_id = report.name
    start = {k: v for k, v in exported["input"].items() if k in ("goal", "agent", "max_turns", "user")}
    cursor = start_run(rt, {**start, "run_id": run_id})
    last = max((int(t) for t in exported["turns"]), default=-1)
    try:
        while cursor["next_turn"] <= last:
            out = model_turn(rt, {**cursor, "resolution": {"action": "retry"}})  # a replay enforces no budgets
            turn = out["turn"]
            if out["route"] == Route.CONTINUE:  # what ContinueAsNew does: a fresh generation from here
                cursor = {**out, "generation": out["generation"] + 1, "generation_start": out["next_turn"]}
                continue
            if out["route"] == Route.DONE and out["stop"] == "max_turns":
                report.divergences.append(f"turn {turn}: the run reaches its turn limit here; the record goes on to turn {last}")
                break
            report.turns += 1
            if out["route"] == Route.DONE and turn < last:
                report.divergences.append(f"turn {turn}: the current code ends the run here ({out.get('stop')}); the record goes on to turn {last}")
                break
            for call in out["calls"]:
                report.calls += 1
                result = results.get(f"{turn}:{call['call']}")
                if result is None and unfinished and turn == last:
                    report.notes.append(f"turn {turn} call {call['call']}: {call['tool']} has not run yet (the run stopped before it)")
                    continue
                if result is None:
                    report.divergences.append(f"turn {turn} call {call['call']}: the record has no result for {call['tool']}")
                    continue
                report.divergences += _check_call(agent, effects, rt, run_id, turn, call, result)
                rt.store.record_step(run_id, keys.tool_step_key(turn, call["call"]), "tool", call["tool"], result)
            cursor = out
        if cursor.get("route") not in (None, Route.DONE) and not unfinished:
            report.divergences.append(f"turn {cursor['turn']}: the record ends the run here; the current code goes on ({cursor['route']})")
    except LongstepError as exc:
        report.divergences.append(f"turn {cursor['next_turn']}: the current code fails: {type(exc).__name__}: {exc}")
        context.forget_cache()
        return report
    messages = transcript({"goal": exported["input"]["goal"]}, rt.store.steps(run_id))
    context.forget_cache()
    if transcript_sha256(messages) != recorded.get("transcript_sha256"):
        report.divergences.append(_transcript_difference(recorded.get("transcript") or [], messages))
    return report


def _runtime(recorded: dict[str, Any], turns: dict[str, Any], agent: Agent) -> Runtime:
    """An in-process runtime on an in-memory table of its own (the context cache keys by table)."""
    table = f"replay-{uuid.uuid4().hex}"
    return Runtime(
        settings=Settings(checkpoint_table=table, idempotency_table="replay", artifact_bucket="replay"),
        store=InMemoryStore(table),
        artifacts=ExportArtifacts(recorded.get("artifacts") or {}),
        lock=NoLock(),
        resolve_agent=lambda name: agent,
        model_override=RecordedModel(recorded.get("replies") or {}, turns),  # type: ignore[arg-type]
    )


def _check_call(
    agent: Agent, effects: dict[str, Any] | None, rt: Runtime, run_id: str, turn: int, call: dict[str, Any], result: dict[str, Any]
) -> list[str]:
    """What the current code would do differently with one recorded call."""
    where = f"turn {turn} call {call['call']}"
    content = result.get("content") if isinstance(result.get("content"), dict) else {}
    if result.get("status") == "error" and content.get("kind") in MODEL_MISTAKES:
        return []  # the model's mistake: the call never ran, whatever the code says of it now
    name = call["tool"]
    tool = agent.tools.tools.get(name)
    if tool is None:
        return [f"{where}: tool {name!r} no longer exists (tools now: {', '.join(sorted(agent.tools.tools))})"]
    out = []
    reply = rt.store.get_step(run_id, keys.model_step_key(turn))
    use = tool_uses(reply.result["message"])[call["call"]] if reply else {"input": {}}
    try:
        tool.parse_args(use["input"])
    except ModelError as exc:
        out.append(f"{where}: the recorded arguments no longer validate: {exc}")
    was = (effects or {}).get(name)
    if was is not None:
        if was.get("effect") != tool.effect.value:
            out.append(f"{where}: tool {name!r} changed effect class: {was.get('effect')} -> {tool.effect.value}")
        if bool(was.get("requires_approval")) != tool.requires_approval:
            out.append(f"{where}: tool {name!r} changed approval: requires_approval {bool(was.get('requires_approval'))} -> {tool.requires_approval}")
    return out


def _results_from_transcript(messages: list[Message]) -> dict[str, Any]:
    """Tool results by ``turn:call``, read from a transcript (exports older than ``tool_results``).

    Each assistant message with tool uses is one turn; its results follow in one user message.
    """
    out: dict[str, Any] = {}
    turn = -1
    uses: dict[str, int] = {}
    for message in messages:
        if message.get("role") == "assistant":
            turn += 1
            uses = {u["toolUseId"]: i for i, u in enumerate(tool_uses(message))}
            continue
        for block in message.get("content", []):
            result = block.get("toolResult")
            if result and result["toolUseId"] in uses:
                payload = result["content"][0]["json"]
                content = payload["value"] if set(payload) == {"value"} else payload
                out[f"{turn}:{uses[result['toolUseId']]}"] = {"status": result["status"], "content": content}
    return out


def _transcript_difference(recorded: list[Message], replayed: list[Message]) -> str:
    """Where the rebuilt transcript first differs from the recorded one."""
    for index, (a, b) in enumerate(zip(recorded, replayed)):
        if a != b:
            return f"transcript: message {index} differs: recorded {json.dumps(a)[:160]}, now {json.dumps(b)[:160]}"
    return f"transcript: the record has {len(recorded)} messages, the current code rebuilds {len(replayed)}"
