"""An agent's MCP servers and how it uses their tools: ``McpServer`` and ``McpTool``.

The server's annotations (``readOnlyHint``, ``idempotentHint``, ``destructiveHint``) are hints;
the agent's declaration wins. A tool declared without an effect class is ``at_most_once`` and
needs a human's approval, unless the run's recorded catalog marks it read-only (then it runs
without approval, still never twice after a crash): ``warnings`` says so at synth and local run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict

from longstep.contract.call import Check
from longstep.errors import ToolFailedError, ToolInputError
from longstep.mcp import client
from longstep.mcp.recorded import read_only
from longstep.resources import NAME, Secret
from longstep.tools.registry import Effect, LedgerFn, ProbeFn, Tool, ToolContext, ToolRegistry

# The ``_meta`` key of a ``tools/call`` request that carries the call's idempotency key
# (``run_id:turn:call``, the same on every retry and replay of the call): a keyed tool's server
# deduplicates on it. Reverse-DNS, as MCP asks of ``_meta`` keys that are not the protocol's.
IDEMPOTENCY_META_KEY = "io.longstep/idempotency-key"
# ``wait_for``'s condition names never hold ':', so these cannot collide with an agent's own.
CONDITION_PREFIX = "mcp:"
MAX_TASK_SECONDS = 365 * 86_400  # a Standard execution lasts at most a year


class McpArguments(BaseModel):
    """A call's arguments: the server validates them against its schema (an invalid call is
    answered with an error the model corrects)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class McpTool:
    """How an agent uses one tool of an MCP server.

    Attributes:
        effect: the effect class (None: ``at_most_once`` with approval, unless the server's
            catalog marks it read-only). ``check_then_act`` is not offered: declare a probe.
        requires_approval: a human decides before the call (None: only for an undeclared effect).
        probe: for ``at_most_once``: did the interrupted call act? (``ctx.idempotency_key`` is the
            key the call carried in ``_meta``).
        ledger: the effects the tool made for a run, from the server's system of record.
        long_running: the call may become a task (Tasks extension): the run waits for it in the
            state machine's condition loop, holding no compute between polls.
        timeout_seconds: a long-running call's task is cancelled after this long.
        poll_seconds: the first interval between polls when the server suggests none.
        summary: what a call does, in the approver's words: a template over the arguments
            (``"Ship {reservation} to {address}"``; the server's schema names them, so the names
            are not checked when the tool is declared).
        risk: what could go wrong, in the approver's words.
    """

    effect: Effect | None = None
    requires_approval: bool | None = None
    probe: ProbeFn | None = None
    ledger: LedgerFn | None = None
    long_running: bool = False
    timeout_seconds: int = 86_400
    poll_seconds: int = 5
    summary: str = ""
    risk: str = ""


@dataclass(frozen=True)
class McpServer:
    """An MCP server (streamable HTTP) whose tools an agent uses.

    Attributes:
        name: the server's name within the agent (lower-case letters, digits, ``_``).
        url: its endpoint (``https://.../mcp``), or a function returning it when called.
        tools: the tools the agent uses, by the server's name for them, with their declarations
            (None: undeclared, see the module's docstring). The model sees no other tool.
        headers: extra request headers (no credentials here: they would sit in the code).
        secret: the credential, a ``Secret`` the agent also lists in ``Agent.resources``.
        secret_header: the header it goes in.
        secret_format: how its value is written there (``{}`` stands for the value).
        timeout_seconds: each request's timeout.
    """

    name: str
    url: str | Callable[[], str]
    tools: Mapping[str, McpTool | None]
    headers: Mapping[str, str] = field(default_factory=dict)
    secret: Secret | None = None
    secret_header: str = "Authorization"
    secret_format: str = "Bearer {}"
    timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise ValueError(f"McpServer.name: expected lower-case letters, digits and _ (starting with a letter), got {self.name!r}")
        if not self.tools:
            raise ValueError(f"McpServer.tools: server {self.name!r} declares no tool the agent uses")
        for tool_name, decl in self.tools.items():
            _check(self.name, tool_name, decl)
        if self.secret is not None and "{}" not in self.secret_format:
            raise ValueError(f"McpServer.secret_format: server {self.name!r}: must contain {{}} where the secret goes")

    def resolved_url(self) -> str:
        """The endpoint to call now."""
        return self.url() if callable(self.url) else self.url

    def request_headers(self) -> dict[str, str]:
        """Every request's headers, the credential read from Secrets Manager included."""
        headers = dict(self.headers)
        if self.secret is not None:
            headers[self.secret_header] = self.secret_format.format(self.secret.value())
        return headers

    def warnings(self) -> list[str]:
        """One line per tool whose safety the agent left to the defaults."""
        return [
            f"MCP tool {self.name}/{name} declares no effect: it runs at_most_once and needs approval unless the server marks it readOnlyHint"
            for name, decl in self.tools.items()
            if decl is None or decl.effect is None
        ]

    def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call one of the server's tools directly, outside the model's view (a probe's question,
        a ledger's listing); a result flagged ``isError`` raises ``ToolInputError``."""
        reply = client.call_tool(self, tool, arguments, {})
        if "task" in reply:
            raise ToolInputError(f"{tool}: the server answered with a task")
        return result_content(tool, reply["result"])

    def register(self, registry: ToolRegistry) -> ToolRegistry:
        """Add the server's declared tools to ``registry`` (and return it)."""
        for name, decl in self.tools.items():
            registry.register(_tool(self, name, decl or McpTool()))
        return registry


def _check(server: str, name: str, decl: McpTool | None) -> None:
    where = f"McpServer.tools[{name!r}] of {server!r}"
    if decl is None:
        return
    if decl.effect is Effect.CHECK_THEN_ACT:
        raise ValueError(f"{where}: check_then_act needs a check in code; declare at_most_once with a probe, or keyed")
    if decl.long_running:
        if decl.effect not in (Effect.READ, Effect.KEYED):
            # A task created twice cannot be told apart: only a server that deduplicates on the
            # key (or a read) makes a crash between creating the task and recording its id safe.
            raise ValueError(f"{where}: a long-running tool must be read or keyed")
        if decl.requires_approval:
            raise ValueError(f"{where}: a long-running tool cannot require approval (the wait starts with the call)")
        if not 1 <= decl.timeout_seconds <= MAX_TASK_SECONDS:
            raise ValueError(f"{where}: timeout_seconds must be between 1 and {MAX_TASK_SECONDS}")
    if decl.probe is not None and decl.effect is not Effect.AT_MOST_ONCE:
        raise ValueError(f"{where}: a probe is only for at_most_once tools")


@dataclass(frozen=True)
class McpCall:
    """A registry tool's function: one ``tools/call`` to the server (or a finished task's result)."""

    server: McpServer
    tool_name: str
    decl: McpTool

    def __call__(self, args: BaseModel, ctx: ToolContext) -> Any:
        if self.decl.long_running:
            return self.outcome(ctx)
        reply = client.call_tool(self.server, self.tool_name, args.model_dump(), {IDEMPOTENCY_META_KEY: ctx.idempotency_key})
        if "task" in reply:  # a server may make a task of any call; only declared ones are waited for
            raise ToolInputError(f"{self.tool_name}: the server answered with a task; declare the tool long_running to wait for it")
        return result_content(self.tool_name, reply["result"])

    def outcome(self, ctx: ToolContext) -> Any:
        """A long-running call's result: what the condition loop found (``ctx.item.check``)."""
        item = ctx.item
        check = (item.check if item is not None else None) or Check()
        if check.error:  # CheckCondition failed past its retries: a human looks
            raise ToolFailedError(f"{self.tool_name}: the task could not be followed: {check.error}")
        if check.cancelled:
            raise ToolInputError(f"{self.tool_name}: the run was stopped; the task was cancelled")
        if check.timed_out:
            raise ToolInputError(f"{self.tool_name}: no result within {self.decl.timeout_seconds} s; the task was cancelled")
        result = check.result or {}
        if result.get("status") == "error":
            raise ToolInputError(f"{self.tool_name}: {result.get('content')}")
        return result.get("content")

    def route(self, use: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
        """How the state machine carries out a call (``Tool.route``)."""
        if self.decl.long_running:
            return {
                "wait": "condition",
                "condition": f"{CONDITION_PREFIX}{self.tool_name}",
                "timeout_seconds": self.decl.timeout_seconds,
                "check_every": self.decl.poll_seconds,
            }
        if self.decl.effect is None and self.decl.requires_approval is None:
            return {"approval": not read_only(run, self.server.name, self.tool_name)}
        return {}


def result_content(name: str, result: Mapping[str, Any]) -> Any:
    """The model's view of a ``CallToolResult``; a result flagged ``isError`` is the model's to handle."""
    content = client.content_of(result)
    if result.get("isError"):
        raise ToolInputError(f"{name}: {content if isinstance(content, str) else content}")
    return content


def _tool(server: McpServer, name: str, decl: McpTool) -> Tool:
    undeclared = decl.effect is None
    call = McpCall(server, name, decl)
    return Tool(
        name=name,
        description=f"{name} (MCP server {server.name})",  # the recorded catalog's description replaces it
        args_model=McpArguments,
        fn=call,
        effect=Effect.AT_MOST_ONCE if undeclared else decl.effect,
        requires_approval=bool(decl.requires_approval) if decl.requires_approval is not None else undeclared,
        probe=decl.probe,
        ledger=decl.ledger,
        route=call.route,
        summary=decl.summary,
        risk=decl.risk,
    )


def mcp_call(item: Tool) -> McpCall | None:
    """The MCP call behind a registry tool, or None for a Python tool."""
    return item.fn if isinstance(item.fn, McpCall) else None
