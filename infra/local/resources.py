"""Where an agent's declared resources are on the local stack: read from its tool function's environment.

The stack creates each agent's tables and gives their physical names only to that agent's
CallTool and CheckCondition functions (``longstep.resources``), so the local stack finds them
there, as the tools do, rather than in stack outputs.
"""

from __future__ import annotations

from typing import Any

from longstep.resources import ENV_AGENT, TABLE_VARIABLE_PREFIX

CALL_TOOL_HANDLER = "longstep_functions.call_tool.lambda_handler"


def tool_function_environment(stack: Any, agent: str) -> dict[str, str]:
    """The environment of ``agent``'s CallTool function on the local stack.

    Raises:
        KeyError: the stack has no CallTool function for ``agent``.
    """
    lam = stack.client("lambda")
    for page in lam.get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            variables = (fn.get("Environment") or {}).get("Variables") or {}
            if fn.get("Handler") == CALL_TOOL_HANDLER and variables.get(ENV_AGENT) == agent:
                return dict(variables)
    raise KeyError(f"agent {agent!r}: no CallTool function on the local stack")


def agent_tables(stack: Any, agent: str) -> dict[str, str]:
    """``agent``'s declared tables: declared name -> physical name."""
    variables = tool_function_environment(stack, agent)
    return {k.removeprefix(TABLE_VARIABLE_PREFIX).lower(): v for k, v in variables.items() if k.startswith(TABLE_VARIABLE_PREFIX)}
