"""Human-readable progress lines for each Lambda invocation of a local run."""

from __future__ import annotations

from typing import Callable

from longstep_kit.local.dispatch import Invocation


def describe(inv: Invocation) -> str | None:
    """One line for an invocation, or None for nothing worth saying."""
    task = inv.task
    ev = inv.event if isinstance(inv.event, dict) else {}
    if inv.error is not None:
        where = f"turn {ev.get('next_turn', ev.get('turn', '?'))}"
        return f"  {where:<8} {task:<16} FAILED   {inv.error['errorType']}: {inv.error['errorMessage'][:160]}"
    res = inv.result or {}
    mode = "replayed" if res.get("replayed") else "executed"
    if task == "init_run":
        how = f"resumed at turn {res['next_turn']}" if res.get("resumed") else "new run"
        return f"run {res.get('run_id')}: started ({how})"
    if task == "model_turn":
        if res.get("stop") == "max_turns":
            return f"  turn {res['turn']:<3} model            stopped  (max_turns reached)"
        tools = ", ".join(c["tool"] for c in res.get("calls", []))
        route = f"-> tools: {tools}" if tools else "-> done"
        return f"  turn {res['turn']:<3} model            {mode} {route}"
    if task == "call_tool":
        return f"  turn {res['turn']:<3} tool[{res['call']}] {res['tool']:<10} {mode} ({res['status']})"
    if task == "request_approval":
        return f"  turn {res['turn']:<3} approval[{res['call']}]      {res['status']}"
    if task == "finish":
        return f"finished after {res.get('turns')} turns"
    return None


def printer(emit: Callable[[str], None]) -> Callable[[Invocation], None]:
    """A dispatcher hook that emits a line per invocation."""

    def hook(inv: Invocation) -> None:
        line = describe(inv)
        if line:
            emit(line)

    return hook
