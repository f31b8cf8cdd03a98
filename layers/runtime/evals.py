"""An eval run's tool calls: answered from the record of the run it is a counterfactual of, never
acting on the world (``longstep eval``, docs/evals.md).

An eval run is an ordinary run whose start input carries ``eval`` (``longstep.inputs.EvalSpec``):
Init keeps it in the run record, ModelTurn routes every call straight to CallTool (no approver, no
wait, no child run: ``longstep.routing``), and CallTool asks :func:`answer` instead of running the
tool. The answer, in this order:

1. the recorded run made the same call (the tool's name and its arguments, equal as canonical
   JSON): its recorded result, whatever the tool's effect class (``recorded``);
2. a call that needs an approver and matches no recorded call: the eval's declared policy:
   ``reject`` tells the model it was rejected (``rejected``), ``withhold`` withholds it, ``approve``
   goes on to rule 3;
3. a ``read`` tool, an unknown tool, or arguments the tool refuses (no effect either way): run
   live, as in any run (``live``);
4. anything else is withheld: it does not run, and the model is told so (``withheld``).

Each recorded result says how it was answered (``ANSWERED``), which the eval's report reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from longstep.errors import ModelError
from longstep.inputs import EvalSpec
from longstep.messages import canonical_json
from longstep.tools.executor import failure
from longstep.tools.registry import Effect

# The key of a recorded result that says how an eval run answered the call, and its values.
ANSWERED = "eval"
RECORDED, LIVE, WITHHELD, REJECTED = "recorded", "live", "withheld", "rejected"

# The records this process has read, by uri (a warm Lambda answers a run's calls from one read).
_RECORDS: dict[str, "EvalRecord"] = {}
_KEEP = 8


def call_key(tool: str, args: Any) -> str:
    """What two calls must share to be the same call: the tool's name and its canonical arguments."""
    return f"{tool}\n{canonical_json(args)}"


@dataclass(frozen=True)
class EvalRecord:
    """The calls a recorded run made, by call key (the document ``longstep eval`` uploads).

    Attributes:
        run_id: the recorded run.
        results: each recorded call's result, by :func:`call_key` (the first of equal calls).
    """

    run_id: str
    results: dict[str, dict[str, Any]]

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> "EvalRecord":
        """The record of ``{"run_id": ..., "calls": [{"tool", "args", "result"}, ...]}``."""
        results: dict[str, dict[str, Any]] = {}
        for call in document.get("calls") or []:
            results.setdefault(call_key(call["tool"], call["args"]), call["result"])
        return cls(run_id=str(document.get("run_id") or ""), results=results)

    def find(self, tool: str, args: Any) -> dict[str, Any] | None:
        """The recorded result of the same call, or None."""
        return self.results.get(call_key(tool, args))


def spec_of(raw: Mapping[str, Any]) -> EvalSpec:
    """The eval setting a run record holds."""
    return EvalSpec.model_validate(raw)


def load_record(artifacts: Any, uri: str) -> EvalRecord:
    """The eval record at ``uri`` (read once per process)."""
    if uri not in _RECORDS:
        if len(_RECORDS) >= _KEEP:
            _RECORDS.clear()
        _RECORDS[uri] = EvalRecord.from_document(json.loads(artifacts.get(uri)))
    return _RECORDS[uri]


def answer(artifacts: Any, agent: Any, setting: Mapping[str, Any], name: str, args: Any, run_live: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """The result of an eval run's call of ``name`` with ``args`` (see the module for the rules).

    Args:
        artifacts: the artifact store the eval record is in.
        agent: the run's agent.
        setting: the run record's eval setting.
        name: the tool called.
        args: the arguments the model gave.
        run_live: runs the call as any run would; called only for a call that cannot act.
    """
    spec = spec_of(setting)
    recorded = load_record(artifacts, spec.record_uri).find(name, args)
    if recorded is not None:
        return {**recorded, ANSWERED: RECORDED}
    tool = agent.tools.tools.get(name)
    if tool is None:
        return {**run_live(args), ANSWERED: LIVE}  # an unknown tool: the model is told, nothing runs
    try:
        tool.parse_args(args)
    except ModelError:
        return {**run_live(args), ANSWERED: LIVE}  # refused before any effect: the model is told why
    if tool.requires_approval and spec.approvals == "reject":
        return {**failure("rejected by the eval's approval policy (no recorded decision for this call)", rejected=True), ANSWERED: REJECTED}
    if tool.effect is Effect.READ and not (tool.requires_approval and spec.approvals == "withhold"):
        return {**run_live(args), ANSWERED: LIVE}
    why = "it needs an approver" if tool.effect is Effect.READ else f"its effect class is {tool.effect.value}"
    return {
        **failure(f"withheld: this is an eval run and {name} was not called so in the recorded run; {why}, so it did not run", withheld=True),
        ANSWERED: WITHHELD,
    }
