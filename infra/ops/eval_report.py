"""What an eval run did differently from the run it is a counterfactual of (docs/evals.md).

Both runs are read as ``longstep export`` writes them. From the fork point on, turn by turn:

- the first turn whose calls (tool and canonical arguments, in order) or, on a turn with no call,
  whose answer differs, or that only one of the two runs has: the first divergence;
- the calls compared by position within a turn: the same tool with other arguments is *changed*,
  a call only the eval makes is *added*, one only the record has is *removed* (another tool at
  the same position is both);
- the effects: a call of a tool whose effect class is not ``read`` that acted. In the record,
  one whose result is a success; in the eval, one answered from the record with a success (the
  record's effect, the same) or withheld (the effect the change would have caused). The two are
  compared as multisets of calls, whatever their turns: *added* are effects only the eval would
  have, *removed* effects only the record had.

The gate (``longstep eval --gate``) fails when an effect is added or removed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from longstep.evals import ANSWERED, LIVE, RECORDED, REJECTED, WITHHELD, call_key
from longstep_kit.ops.evals import recorded_calls, recorded_turns


@dataclass
class EvalReport:
    """One eval run against its record.

    Attributes:
        run_id: the recorded run.
        eval_run_id: the eval run.
        at_turn: the first turn under the change.
        status: how the eval run's execution ended.
        recorded_status: how the recorded run ended (None: not known, an export file).
        first_divergence: the first turn where the eval differs from the record (None: none).
        added, removed, changed: the calls (``turn``, ``call``, ``tool``, ``args``; a changed
            call has ``recorded_args`` too).
        effects_added: effects the eval would have had that the record did not (``effect`` too).
        effects_removed: effects the record had that the eval did not.
        answered: how the eval's calls were answered: ``recorded``, ``live``, ``withheld``, ``rejected``.
        withheld: the calls withheld (what the eval run would have done).
        output, recorded_output: the last answer of each run.
        tokens, recorded_tokens: the model tokens of each run's turns from the fork point on
            (``{"input": ..., "output": ...}``, as the replies recorded them).
    """

    run_id: str
    eval_run_id: str
    at_turn: int
    status: str
    recorded_status: str | None
    first_divergence: int | None = None
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    effects_added: list[dict[str, Any]] = field(default_factory=list)
    effects_removed: list[dict[str, Any]] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=dict)
    withheld: list[dict[str, Any]] = field(default_factory=list)
    output: str = ""
    recorded_output: str = ""
    tokens: dict[str, int] = field(default_factory=dict)
    recorded_tokens: dict[str, int] = field(default_factory=dict)

    @property
    def gate_passed(self) -> bool:
        """True when the change adds no effect and removes none."""
        return not self.effects_added and not self.effects_removed

    def to_json(self) -> dict[str, Any]:
        """The report as ``--output json`` prints it."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["gate_passed"] = self.gate_passed
        return out


def compare(recorded: dict[str, Any], evaluated: dict[str, Any], at_turn: int, status: str, recorded_status: str | None) -> EvalReport:
    """The report of ``evaluated`` (the eval run's export) against ``recorded`` (the record's) from ``at_turn``."""
    report = EvalReport(
        run_id=str(recorded["name"]),
        eval_run_id=str(evaluated["name"]),
        at_turn=at_turn,
        status=status,
        recorded_status=recorded_status,
        output=_last_answer(evaluated),
        recorded_output=_last_answer(recorded),
        tokens=_tokens(evaluated, at_turn),
        recorded_tokens=_tokens(recorded, at_turn),
    )
    effects = {**(recorded["recorded"].get("tool_effects") or {}), **(evaluated["recorded"].get("tool_effects") or {})}
    before = _by_turn([c for c in recorded_calls(recorded) if c["turn"] >= at_turn])
    after = _by_turn([c for c in recorded_calls(evaluated) if c["turn"] >= at_turn])
    turns = sorted({t for t in recorded_turns(recorded) + recorded_turns(evaluated) if t >= at_turn})
    for turn in turns:
        if report.first_divergence is None and _signature(recorded, before, turn) != _signature(evaluated, after, turn):
            report.first_divergence = turn
        _diff_calls(report, before.get(turn, []), after.get(turn, []))
    answered = Counter((c["result"] or {}).get(ANSWERED) for calls in after.values() for c in calls)
    report.answered = {how: answered.get(how, 0) for how in (RECORDED, LIVE, WITHHELD, REJECTED)}
    report.withheld = [_call(c, effect=_effect(effects, c)) for calls in after.values() for c in calls if _how(c) == WITHHELD]
    had = [c for calls in before.values() for c in calls if _acted(effects, c)]
    would = [c for calls in after.values() for c in calls if _acted(effects, c)]
    report.effects_added = [_call(c, effect=_effect(effects, c)) for c in _minus(would, had)]
    report.effects_removed = [_call(c, effect=_effect(effects, c)) for c in _minus(had, would)]
    return report


def render_text(report: EvalReport, gate: bool = False) -> str:
    """The report as lines for a terminal: a summary, then one line per differing call and effect."""
    lines = [
        f"eval {report.eval_run_id} of run {report.run_id} from turn {report.at_turn}: {report.status} (recorded: {report.recorded_status or 'unknown'})",
        f"  first divergence: {'none' if report.first_divergence is None else f'turn {report.first_divergence}'}",
        "  calls: {recorded} answered from the record, {live} run live (reads), {withheld} withheld, {rejected} rejected".format(**report.answered),
    ]
    rows = [("changed", c, _changed_args(c["recorded_args"], c["args"])) for c in report.changed]
    rows += [("added", c, _args(c["args"])) for c in report.added] + [("removed", c, _args(c["args"])) for c in report.removed]
    if rows:
        lines.append(f"  {'TURN':<5} {'CALL':<5} {'CHANGE':<8} {'TOOL':<16} ARGUMENTS")
        for change, c, args in sorted(rows, key=lambda r: (r[1]["turn"], r[1]["call"], r[0])):
            lines.append(f"  {c['turn']:<5} {c['call']:<5} {change:<8} {c['tool']:<16} {args}")
    for what, found in (("would add", report.effects_added), ("would remove", report.effects_removed)):
        for c in found:
            lines.append(f"  effect the change {what}: {c['tool']} ({c['effect']}) {_args(c['args'])}, turn {c['turn']}")
    was, now = report.recorded_tokens, report.tokens
    lines.append(f"  tokens: {now['input']} in, {now['output']} out (recorded {was['input']} in, {was['output']} out)")
    if report.output != report.recorded_output:
        lines.append(f"  answer: {report.output[:100]!r} (recorded {report.recorded_output[:100]!r})")
    if gate:
        verdict = "passed" if report.gate_passed else f"FAILED ({len(report.effects_added)} effects added, {len(report.effects_removed)} removed)"
        lines.append(f"  gate: {verdict}")
    return "\n".join(lines)


def render_table(reports: list[EvalReport]) -> str:
    """One line per eval of a set, and the set's total: the aggregate after each run's report."""
    lines = [f"{'RUN':<24} {'EVAL RUN':<28} {'STATUS':<10} {'DIVERGED':<9} {'+EFFECTS':>8} {'-EFFECTS':>8}  GATE"]
    for r in reports:
        diverged = "-" if r.first_divergence is None else f"turn {r.first_divergence}"
        gate = "passed" if r.gate_passed else "FAILED"
        lines.append(f"{r.run_id:<24} {r.eval_run_id:<28} {r.status:<10} {diverged:<9} {len(r.effects_added):>8} {len(r.effects_removed):>8}  {gate}")
    diverged = sum(r.first_divergence is not None for r in reports)
    failed = sum(not r.gate_passed for r in reports)
    lines.append(f"{len(reports)} runs: {diverged} diverged, {failed} add or remove effects")
    return "\n".join(lines)


def _by_turn(calls: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for c in calls:
        out.setdefault(c["turn"], []).append(c)
    return out


def _signature(exported: dict[str, Any], calls: dict[int, list[dict[str, Any]]], turn: int) -> Any:
    """What a turn did: its calls, or its answer when it made none (None: no such turn)."""
    reply = exported["turns"].get(str(turn))
    if reply is None:
        return None
    return [call_key(c["tool"], c["args"]) for c in calls.get(turn, [])] or reply.get("text", "")


def _diff_calls(report: EvalReport, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    for index in range(max(len(before), len(after))):
        was = before[index] if index < len(before) else None
        now = after[index] if index < len(after) else None
        if was and now and was["tool"] == now["tool"]:
            if call_key(was["tool"], was["args"]) != call_key(now["tool"], now["args"]):
                report.changed.append(_call(now, recorded_args=was["args"]))
            continue
        if was:
            report.removed.append(_call(was))
        if now:
            report.added.append(_call(now))


def _how(call: dict[str, Any]) -> str | None:
    return (call["result"] or {}).get(ANSWERED)


def _effect(effects: dict[str, Any], call: dict[str, Any]) -> str:
    """The tool's effect class as recorded (``unknown``: a tool neither run recorded)."""
    return str((effects.get(call["tool"]) or {}).get("effect") or "unknown")


def _acted(effects: dict[str, Any], call: dict[str, Any]) -> bool:
    """Whether the call acted on the world (the record's), or would have (the eval's, withheld)."""
    if _effect(effects, call) in ("read", "unknown"):
        return False
    if _how(call) == WITHHELD:
        return True
    return (call["result"] or {}).get("status") == "success"


def _minus(calls: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``calls`` less one of each equal call in ``other`` (multisets of calls)."""
    left = Counter(call_key(c["tool"], c["args"]) for c in other)
    out = []
    for c in calls:
        key = call_key(c["tool"], c["args"])
        if left[key]:
            left[key] -= 1
        else:
            out.append(c)
    return out


def _call(call: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"turn": call["turn"], "call": call["call"], "tool": call["tool"], "args": call["args"], **extra}


def _args(args: Any) -> str:
    text = json.dumps(args, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _changed_args(was: Any, now: Any) -> str:
    """The arguments of a changed call that differ (all of them when either is not an object)."""
    if not isinstance(was, dict) or not isinstance(now, dict):
        return f"{_args(now)} (recorded {_args(was)})"
    keys = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
    return f"{_args({k: now.get(k) for k in keys})} (recorded {_args({k: was.get(k) for k in keys})})"


def _tokens(exported: dict[str, Any], at_turn: int) -> dict[str, int]:
    """The model tokens of the turns from ``at_turn`` on, as the export's replies recorded them."""
    turns = [exported["turns"][str(t)] for t in recorded_turns(exported) if t >= at_turn]
    return {"input": sum(int(t.get("input_tokens") or 0) for t in turns), "output": sum(int(t.get("output_tokens") or 0) for t in turns)}


def _last_answer(exported: dict[str, Any]) -> str:
    turns = recorded_turns(exported)
    return str(exported["turns"][str(turns[-1])].get("text", "")) if turns else ""
