"""Human-readable progress lines for each Lambda invocation of a local run.

A call that did not run says so (rejected, its approval timed out, cancelled), a wait says what
ended it (its timer, a signal, its timeout), a child run's lines carry its run id, and lines from
parallel steps (the calls of one Map) are written whole, one at a time.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, TextIO

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
        return f"  turn {res['turn']:<3} tool[{res['call']}] {res['tool']:<10} {_call_outcome(_item(ev), res, mode)}"
    if task == "request_approval":
        return f"  turn {res['turn']:<3} approval[{res['call']}]      {res['status']}"
    if task == "finish":
        return f"finished after {res.get('turns')} turns"
    return None


def _item(event: dict[str, Any]) -> dict[str, Any]:
    item = event.get("item")
    return item if isinstance(item, dict) else event


def _call_outcome(item: dict[str, Any], res: dict[str, Any], mode: str) -> str:
    """What happened to a tool call: run (and how it ended), not run (and why), or a wait's end."""
    decision = (item.get("decision") or {}).get("decision")
    if decision == "reject":
        return "not run: the approver rejected it"
    if decision == "timeout":
        return "not run: its approval expired (nobody decided in time)"
    wait = item.get("wait")
    if wait == "timer":
        return f"{mode}: the timer fired (waited until {item.get('wait_until') or '?'})"
    if wait == "event":
        timed_out = (item.get("signal") or {}).get("timed_out")
        return f"{mode}: " + (f"no {item.get('event')} signal came; the wait timed out" if timed_out else f"signal {item.get('event')} received")
    if wait == "subagent":
        return f"{mode}: its child run answered ({res['status']})"
    return f"{mode} ({res['status']})"


def _run_of(inv: Invocation) -> str | None:
    res = inv.result if isinstance(inv.result, dict) else {}
    ev = inv.event if isinstance(inv.event, dict) else {}
    return res.get("run_id") or _item(ev).get("run_id")


def printer(emit: Callable[[str], None]) -> Callable[[Invocation], None]:
    """A dispatcher hook that emits a line per invocation; a child run's lines name it."""
    first: list[str] = []

    def hook(inv: Invocation) -> None:
        line = describe(inv)
        if not line:
            return
        run = _run_of(inv)
        if run and not first:
            first.append(run)
        if run and first and run != first[0] and not line.startswith("run "):
            line = f"  [{run}]{line[1:]}" if line.startswith("  ") else f"[{run}] {line}"
        emit(line)

    return hook


def line_writer(out: TextIO | None = None) -> Callable[[str], None]:
    """Print whole lines to ``out`` (stdout by default), one at a time: the calls of a Map finish
    on several threads, and ``print`` writes a line and its newline separately."""
    lock = threading.Lock()

    def emit(line: str) -> None:
        stream = out or sys.stdout
        with lock:
            stream.write(line + "\n")
            stream.flush()

    return emit
