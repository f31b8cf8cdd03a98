"""The examples docs/workflows.md shows are real files, run here; the page names each of them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from longstep.errors import NonDeterminismError
from longstep.workflows import log
from longstep.workflows.testing import replay_recorded, run_in_memory

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workflows"
DOC = ROOT / "docs" / "workflows.md"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"workflow_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_names_every_example_and_every_named_example_exists():
    text = DOC.read_text()
    named = set(re.findall(r"examples/workflows/(\w+\.py)", text))
    assert named == {p.name for p in EXAMPLES.glob("*.py")}


def test_order_pipeline_runs_each_effect_once_and_sleeps_without_invocations():
    pipeline = example("order_pipeline")
    request = {"order": "o-1", "lines": [{"item": "book", "qty": 9}, {"item": "pen", "qty": 3}]}
    run = run_in_memory(pipeline.build(), request, signals={"shipped": {"order": "o-1", "carrier": "ups"}})
    assert run.status == log.DONE and run.output["status"] == "done" and run.output["carrier"] == "ups"
    assert pipeline.CHARGES == ["o-1:114"] and len(pipeline.WAREHOUSE) == 1
    assert any(d["next"] == log.APPROVE and d["name"] == "large-order" for d in run.directives)
    assert run.seconds == 14 * 86_400
    # Replaying the finished run's log runs nothing again and computes the same output.
    assert replay_recorded(pipeline.build(), run.store) == run.output
    assert pipeline.CHARGES == ["o-1:114"]


def test_order_pipeline_takes_the_refusal_path_when_the_approver_says_no():
    pipeline = example("order_pipeline")
    request = {"order": "o-2", "lines": [{"item": "book", "qty": 10}]}
    run = run_in_memory(pipeline.build(), request, decisions={"large-order": {"decision": "reject", "reason": "too much"}})
    assert run.output == {"order": "o-2", "status": "refused"}


def test_reading_the_clock_outside_the_context_breaks_replay():
    determinism = example("determinism")
    with pytest.raises(NonDeterminismError, match="recorded as step:morning_report but the code now asks for step:evening_report"):
        run_in_memory(determinism.build_flaky())
    assert run_in_memory(determinism.build_steady()).output == "sent: morning report"


def test_a_code_change_is_checked_against_a_recorded_run():
    replay_check = example("replay_check")
    recorded = run_in_memory(replay_check.VERSIONS["v1"])
    assert replay_recorded(replay_check.VERSIONS["v2_compatible"], recorded.store) == "LOADED 42 ROWS"
    with pytest.raises(NonDeterminismError, match="position 1 was recorded as step:fetch but the code now asks for step:load"):
        replay_recorded(replay_check.VERSIONS["v2_reordered"], recorded.store)


def test_agent_step_records_the_childs_answer_and_replays_it_without_a_second_child():
    agent_step = example("agent_step")
    asked = []

    def triage(goal, inputs):
        asked.append(inputs)
        return "Summary: flaky, does not block"

    run = run_in_memory(agent_step.WORKFLOW, {"failing": ["test_x"]}, run_id="incident-1", agents={"triage": triage})
    assert run.output == {"verdict": "Summary: flaky, does not block", "child_run": "incident-1-s2"}
    assert asked == [{"failures": ["test_x"]}]
    assert replay_recorded(agent_step.WORKFLOW, run.store, "incident-1") == run.output and len(asked) == 1

    def broken(goal, inputs):
        raise RuntimeError("aborted at an escalation")

    failed = run_in_memory(agent_step.WORKFLOW, {"failing": ["test_x"]}, agents={"triage": broken})
    assert failed.output["verdict"] == "ask a human" and "aborted at an escalation" in failed.output["why"]
