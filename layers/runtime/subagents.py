"""Subagents: an agent hands part of its work to another agent, as a child run.

An agent declares the agents it may delegate to (``Agent(..., subagents=("research",))``); the
model sees each as a tool taking a ``goal`` and optional ``inputs``. The state machine carries
out such a call (``DelegateToSubagent``, ``longstep.child_runs``): it starts a child run of
the same state machine and parks the call on a task token until the child's Finish answers it.
The tool's result, recorded by CallTool like any other, is the child's answer (or its failure).

The child's run id is derived from the parent's run, turn and call, so a retried or crashed
parent step starts no second child: the execution name is the child's run id, and a start with a
name already taken is the same child.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from longstep import environment
from longstep.errors import ToolInputError
from longstep.inputs import MAX_RUN_ID
from longstep.settings import ENV_SUBAGENT_MAX_CHILDREN as ENV_MAX_CHILDREN, ENV_SUBAGENT_MAX_DEPTH as ENV_MAX_DEPTH
from longstep.tools.registry import Effect, Tool, ToolContext

# The Map item's ``wait`` for a delegated call (the Dispatch choice routes it to DelegateToSubagent).
SUBAGENT_WAIT = "subagent"
# Records in the parent's partition: one per delegated call, holding the parked task token.
CHILD_PREFIX = "child#"
DEFAULT_MAX_DEPTH = 2
DEFAULT_MAX_CHILDREN = 16
# The error a child's failure is handed to the parent's task token with (SendTaskFailure).
CHILD_FAILED_ERROR = "SubagentFailed"


class SubagentArgs(BaseModel):
    """What the model gives a subagent: the goal of its run, and optional inputs (JSON) it is shown."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1, max_length=10_000, description="what the subagent should do")
    inputs: dict[str, Any] = Field(default_factory=dict, description="data the subagent needs (JSON), shown with the goal")

    def child_goal(self) -> str:
        """The child run's goal: the goal, then the inputs as JSON when there are any."""
        if not self.inputs:
            return self.goal
        return f"{self.goal}\n\nInputs:\n{json.dumps(self.inputs, sort_keys=True)}"


@dataclass(frozen=True)
class SubagentLimits:
    """How far delegation may go, from the deployment's configuration.

    Attributes:
        max_depth: how deep the tree of runs may be (a top-level run is depth 0; its children 1).
        max_children: children one run may start over its whole life.
    """

    max_depth: int = DEFAULT_MAX_DEPTH
    max_children: int = DEFAULT_MAX_CHILDREN

    @classmethod
    def from_env(cls) -> "SubagentLimits":
        """The limits of the function's environment (the defaults where unset)."""
        return cls(
            max_depth=_positive(ENV_MAX_DEPTH, DEFAULT_MAX_DEPTH),
            max_children=_positive(ENV_MAX_CHILDREN, DEFAULT_MAX_CHILDREN),
        )

    def refusal(self, parent_depth: int, ordinal: int) -> str | None:
        """Why the ``ordinal``-th child (0-based) of a run at ``parent_depth`` may not start, or None."""
        if parent_depth + 1 > self.max_depth:
            return f"subagent depth limit reached: a run at depth {parent_depth} may not delegate (max depth {self.max_depth})"
        if ordinal >= self.max_children:
            return f"subagent limit reached: this run has already started {self.max_children} subagent runs"
        return None


def _positive(name: str, default: int) -> int:
    raw = environment.get(name)
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 0:
        raise ValueError(f"environment variable {name}: a non-negative integer is required, got {raw!r}")
    return int(raw)


def child_run_id(parent_run_id: str, turn: int, call: int) -> str:
    """The run id (and first execution name) of the child started by call ``call`` of ``turn``.

    ``<parent>-t<turn>c<call>``; when that would pass the run-id limit, the parent's id is cut
    and a hash of the whole parent id keeps children of different parents apart.
    """
    return derived_run_id(parent_run_id, f"-t{turn}c{call}")


def derived_run_id(parent_run_id: str, suffix: str) -> str:
    """``<parent><suffix>``, or when that would pass the run-id limit, the parent's id cut and a
    hash of the whole parent id (children of different parents stay apart)."""
    plain = f"{parent_run_id}{suffix}"
    if len(plain) <= MAX_RUN_ID:
        return plain
    digest = hashlib.sha256(parent_run_id.encode()).hexdigest()[:10]
    head = parent_run_id[: MAX_RUN_ID - len(suffix) - len(digest) - 1]
    return f"{head}-{digest}{suffix}"


def child_key(turn: int, call: int) -> str:
    """Sort key, in the parent's partition, of the record of call ``call`` of ``turn``."""
    return f"{CHILD_PREFIX}{turn:06d}#{call:03d}"


def child_script_uri(parent_script_uri: str, tool_use_id: str) -> str:
    """The script of a scripted child: the parent's script's ``children`` entry of the tool use.

    ``s3://bucket/key#t0c1`` names ``children["t0c1"]`` of the script at ``s3://bucket/key``; a
    grandchild adds ``/t1c0``.
    """
    base, sep, path = parent_script_uri.partition("#")
    return f"{base}#{path}/{tool_use_id}" if sep else f"{base}#{tool_use_id}"


def routing(subagents: tuple[str, ...], use: dict[str, Any]) -> dict[str, Any] | None:
    """The Map item fields of a delegated call, or None when ``use`` is not one (or its arguments
    are invalid: CallTool then tells the model the schema error)."""
    if use["name"] not in subagents:
        return None
    try:
        SubagentArgs.model_validate(use["input"])
    except ValueError:
        return None
    return {"wait": SUBAGENT_WAIT, "subagent": use["name"]}


def delegate_result(args: SubagentArgs, ctx: ToolContext) -> dict[str, Any]:
    """The child's outcome the state machine handed this call (``ctx.item.child``), as the tool result."""
    item = ctx.item
    child = None if item is None else item.child
    if item is None or item.wait != SUBAGENT_WAIT or child is None:
        raise ToolInputError("the state machine carried out no delegation for this call")
    if child.refused:
        raise ToolInputError(str(child.refused))
    if child.timed_out:
        raise ToolInputError(f"the subagent {item.subagent} did not finish in time")
    if "error" in child.model_fields_set:  # caught from SendTaskFailure: the child run failed
        raise ToolInputError(f"the subagent {item.subagent} failed: {child.cause or child.error}")
    return child.result()


def subagent_tool(name: str) -> Tool:
    """The tool the model calls to delegate to the agent ``name``.

    Its effect is ``read``: the child is started once by the state machine (keyed by its run id),
    and the tool itself only reads the outcome it was handed.
    """
    return Tool(
        name=name,
        description=(
            f"Delegate a task to the {name} agent: give it a goal (and optional JSON inputs). It works on its own run and returns its final answer."
        ),
        args_model=SubagentArgs,
        fn=delegate_result,
        effect=Effect.READ,
    )
