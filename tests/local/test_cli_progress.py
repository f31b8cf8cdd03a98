"""A local run's progress lines say what happened: a rejected call or an expired approval did not
run, a timer or a signal ended a wait, a child run's lines carry its id, and lines written from
parallel threads come out whole."""

from __future__ import annotations

import io
import threading

from longstep_kit.local.dispatch import Invocation
from longstep_kit.local.progress import describe, line_writer, printer


def _call(item: dict, status: str = "success", run_id: str = "r1") -> Invocation:
    result = {"run_id": run_id, "turn": 0, "call": 1, "tool": item.get("tool", "send_email"), "status": status, "replayed": False}
    return Invocation("CallTool", "longstep_functions.call_tool.lambda_handler", {"item": {"run_id": run_id, **item}}, result)


def test_calls_that_did_not_run_say_why():
    assert describe(_call({"decision": {"decision": "reject", "reason": "no"}}, "error")).endswith("send_email not run: the approver rejected it")
    assert describe(_call({"decision": {"decision": "timeout"}}, "error")).endswith("not run: its approval expired (nobody decided in time)")
    assert describe(_call({"decision": {"decision": "approve"}})).endswith("executed (success)")
    assert "executed (error)" in describe(_call({}, "error"))  # a call that ran and failed


def test_waits_say_what_ended_them():
    timer = describe(_call({"tool": "wait_for", "wait": "timer", "wait_until": "2026-01-03T00:00:00Z"}))
    assert timer.endswith("executed: the timer fired (waited until 2026-01-03T00:00:00Z)")
    got = describe(_call({"tool": "wait_for", "wait": "event", "event": "ci_finished", "signal": {"payload": {}}}))
    assert got.endswith("executed: signal ci_finished received")
    timed_out = describe(_call({"tool": "wait_for", "wait": "event", "event": "rollback", "signal": {"timed_out": True}}))
    assert timed_out.endswith("no rollback signal came; the wait timed out")


def test_a_child_runs_lines_carry_its_run_id():
    lines: list[str] = []
    hook = printer(lines.append)
    hook(Invocation("Init", "longstep_functions.init_run.lambda_handler", {}, {"run_id": "lead", "resumed": False}))
    hook(_call({}, run_id="lead"))
    hook(_call({}, run_id="lead-t0c1"))
    assert lines[1].startswith("  turn 0   tool[1]")
    assert lines[2].startswith("  [lead-t0c1] turn 0   tool[1]")


def test_lines_from_parallel_threads_come_out_whole():
    out = io.StringIO()
    emit = line_writer(out)
    line = "  turn 0   approval[1]      pending"
    threads = [threading.Thread(target=lambda: [emit(line) for _ in range(200)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert out.getvalue().splitlines() == [line] * 1600


def test_a_workflow_runs_summary_lists_its_recorded_steps():
    from longstep.workflows.log import step_key
    from longstep_kit.cli.workflow_cmds import step_lines

    steps = [{"sk": step_key(1), "kind": "now", "name": "now"}, {"sk": step_key(2), "kind": "step", "name": "build_artifact"}]
    steps.append({"sk": step_key(3, 1), "kind": "agent", "name": "triage"})
    assert step_lines(steps) == ["  step 1     now", "  step 2     step     build_artifact", "  step 3.1   agent    triage"]


def test_random_faults_that_fired_fewer_than_asked_say_so():
    from longstep_kit.cli.run_summary import fewer_faults_line

    assert fewer_faults_line("random:12", 9) == "  note: --faults random:12 fired 9 of 12: the run ended before the other planned points were reached"
    assert fewer_faults_line("random:12", 12) is None
    assert fewer_faults_line(None, 0) is None
