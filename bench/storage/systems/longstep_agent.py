"""The coding agent the storage bench's Longstep run drives: the session's six tools, each
returning the session's recorded output for its call, and the session's model messages as a
script (``bench.storage.systems.longstep_runtime``)."""

from typing import Any

from pydantic import BaseModel

from bench.storage.session import Session

AGENT = "coder"


class ReadFileArgs(BaseModel):
    path: str


class GrepArgs(BaseModel):
    pattern: str
    path: str = "."


class EditFileArgs(BaseModel):
    path: str
    old_string: str
    new_string: str


class RunTestsArgs(BaseModel):
    path: str = "tests/"
    args: str = "-q"


class NoArgs(BaseModel):
    pass


class ListFilesArgs(BaseModel):
    path: str = "."


TOOLS: dict[str, tuple[type[BaseModel], str, str]] = {
    "read_file": (ReadFileArgs, "read", "Read a file of the repository."),
    "grep": (GrepArgs, "read", "Search the repository for a pattern; returns path:line:text lines."),
    "edit_file": (EditFileArgs, "keyed", "Replace old_string by new_string in a file; returns the diff."),
    "run_tests": (RunTestsArgs, "read", "Run pytest on a path; returns the log."),
    "git_diff": (NoArgs, "read", "Show the working tree's diff."),
    "list_files": (ListFilesArgs, "read", "List the files under a path with their sizes."),
}


def _tool_fn(session: Session, name: str) -> Any:
    def fn(args: BaseModel, ctx: Any) -> str:
        call = session.call(ctx.turn, ctx.call)
        if call.name != name or args.model_dump() != call.input:
            raise AssertionError(f"turn {ctx.turn} call {ctx.call}: got {name}{args.model_dump()}, session has {call.name}{call.input}")
        return call.output

    return fn


def build_agent(session: Session) -> Any:
    """The coding agent, built from the ``longstep`` modules currently imported."""
    from longstep.agent import Agent
    from longstep.tools.registry import Effect, Tool, ToolRegistry

    registry = ToolRegistry()
    for name, (args_model, effect, doc) in TOOLS.items():
        registry.register(Tool(name=name, description=doc, args_model=args_model, fn=_tool_fn(session, name), effect=Effect(effect)))
    return Agent(name=AGENT, system_prompt=session.system_prompt, tools=registry)


def script(session: Session) -> dict[str, Any]:
    """The session's model messages as a ``longstep.models.scripted`` script document."""
    return {
        "turns": {
            str(t.index): {"text": t.text, "tool_calls": [{"name": c.name, "input": c.input, "id": c.id} for c in t.calls]} for t in session.turns
        }
    }
