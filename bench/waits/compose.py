"""What a parent spends while it waits on a child run, and a workflow while it sleeps 2 days (issue 14).

Two shipped scenarios run on the local stack (enforcement on, virtual clock), and the counts come
from the waiting execution's own history, between the events where its wait starts and ends:

- ``events/scenarios/delegate.json``: the lead's turn delegates two questions; each
  ``DelegateToSubagent`` task of the ToolCalls Map starts a child run and parks on a task token
  (``TaskSubmitted``) until the child's terminal state answers it (``TaskSucceeded``). The window
  in which the whole parent waits is from the last of its delegations parking to the first
  answer: both children run, the parent has nothing in flight. Each delegation's own window
  (its park to its answer) is counted too: the parent's events inside it are the other
  delegation's (parking, or its CallTool once its child answered), never this one's.
- ``events/scenarios/release.json``: the release workflow's ``ctx.sleep(days=2)`` is a Wait
  state; its window is from ``WaitStateEntered`` to ``WaitStateExited``. The sleep is found by
  its events (the Wait state entered for the 2-day directive), not by a position: the workflow
  may gain steps.

Counted as AWS bills them: Standard workflows bill state transitions
(https://aws.amazon.com/step-functions/pricing/), one each time a state is entered (a
``*StateEntered`` event; the cost bench counts them the same way); a Lambda invocation is a ``LambdaFunctionScheduled`` or a ``TaskScheduled`` of a
``lambda`` resource in the history. The Wait state's own entry is the one transition the 2-day
sleep costs (before the window); the parent's ``DelegateToSubagent`` entries are the ones its
delegations cost. The dispatcher's own count of invocations for the waiting run's id during the
window (on the virtual clock) is a cross-check for the sleep.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DELEGATE = ROOT / "events" / "scenarios" / "delegate.json"
RELEASE = ROOT / "events" / "scenarios" / "release.json"
TWO_DAYS = 2 * 86_400
DELEGATE_STATE = "DelegateToSubagent"


def history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    from bench.waits.polling import history as read

    return read(sfn, arn)


def _is_lambda(event: dict[str, Any]) -> bool:
    if event["type"] == "LambdaFunctionScheduled":
        return True
    details = event.get("taskScheduledEventDetails") or {}
    return event["type"] == "TaskScheduled" and details.get("resourceType") == "lambda"


def count(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Lambda invocations, state transitions and events in a slice of a history."""
    return {
        "lambda_invocations": sum(1 for e in events if _is_lambda(e)),
        "state_transitions": sum(1 for e in events if e["type"].endswith("StateEntered")),
        "history_events": len(events),
        "event_types": sorted({e["type"] for e in events}),
    }


def _entered(event: dict[str, Any]) -> str | None:
    details = event.get("stateEnteredEventDetails")
    return details.get("name") if details and event["type"].endswith("StateEntered") else None


def _chain_end(events: list[dict[str, Any]], start: int, types: tuple[str, ...]) -> int:
    """The index of the first event of ``types`` that follows ``events[start]`` on its own branch
    (``previousEventId`` links: a Map iteration's events chain, interleaved with the others')."""
    by_id = {e["id"]: i for i, e in enumerate(events)}
    on_branch = {events[start]["id"]}
    for i in range(start + 1, len(events)):
        if events[i].get("previousEventId") in on_branch:
            if events[i]["type"] in types:
                return i
            on_branch.add(events[i]["id"])
    raise RuntimeError(f"no {types} after event {events[start]['id']} on its branch ({len(by_id)} events)")


def delegate_windows(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The parent's wait on its children, from its history."""
    delegations = [i for i, e in enumerate(events) if _entered(e) == DELEGATE_STATE]
    parks = [next(j for j in range(i + 1, len(events)) if events[j]["type"] == "TaskSubmitted" and _on(events, i, j)) for i in delegations]
    answers = [_chain_end(events, p, ("TaskSucceeded", "TaskFailed", "TaskTimedOut")) for p in parks]
    if not parks:
        raise RuntimeError("the parent delegated nothing")
    whole_start, whole_end = max(parks), min(answers)
    return {
        "delegations": len(parks),
        "answered_by": sorted({events[a]["type"] for a in answers}),
        "all_parked": {
            "from_event": events[whole_start]["id"],
            "to_event": events[whole_end]["id"],
            **count(events[whole_start + 1 : whole_end] if whole_end > whole_start else []),
        },
        "each": [
            {
                "from_event": events[p]["id"],
                "to_event": events[a]["id"],
                "own_branch": count([events[k] for k in range(p + 1, a) if _on(events, p, k)]),
                "whole_history": count(events[p + 1 : a]),
            }
            for p, a in zip(parks, answers)
        ],
        "delegation_transitions": len(delegations),
    }


def _on(events: list[dict[str, Any]], start: int, index: int) -> bool:
    """Whether ``events[index]`` follows ``events[start]`` on its branch."""
    on_branch = {events[start]["id"]}
    for i in range(start + 1, index + 1):
        if events[i].get("previousEventId") in on_branch:
            on_branch.add(events[i]["id"])
    return events[index]["id"] in on_branch


def measure_delegate(runs: int, emit: Any) -> dict[str, Any]:
    """``runs`` runs of delegate.json on one stack: the parent's counts while it waits."""
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.project import agent_catalog

    scenario = load_scenario(DELEGATE)
    samples = []
    with LocalStack(context={"longstep": {"agents": {**agent_catalog().references, **scenario.agents}}}) as stack:
        assert stack.enforce and stack.enforcement.policies is not None  # IAM, limits, ASL strictness on
        sfn = stack.client("stepfunctions")
        prefix = stack.state_machine_arn.replace(":stateMachine:", ":execution:") + ":"
        for i in range(runs):
            stack.reset_data()
            name = f"bench-delegate-{i:02d}"
            report = run_scenario(stack, scenario, RunOptions(run_id=name, execution_name=name, timeout_seconds=300))
            if report["status"] != "SUCCEEDED":
                raise RuntimeError(f"{name} ended {report['status']}: {report.get('cause')}")
            parent = history(sfn, prefix + name)
            children = sorted(
                e["name"]
                for e in sfn.list_executions(stateMachineArn=stack.state_machine_arn, maxResults=1000)["executions"]
                if e["name"].startswith(f"{name}-t")
            )
            child_counts = [count(history(sfn, prefix + child)) for child in children]
            samples.append(
                {
                    "execution": name,
                    "status": report["status"],
                    "transcript_sha256": report["transcript_sha256"],
                    "parent": {**delegate_windows(parent), "run": count(parent)},
                    "children": {c: {k: v for k, v in n.items() if k != "event_types"} for c, n in zip(children, child_counts)},
                }
            )
            emit(f"delegate run {i + 1}/{runs}: parent while all parked {samples[-1]['parent']['all_parked']['state_transitions']} transitions")
    return {"scenario": "events/scenarios/delegate.json", "runs": runs, "samples": samples}


def measure_release(runs: int, emit: Any) -> dict[str, Any]:
    """``runs`` runs of release.json on one stack: the workflow's counts while it sleeps 2 days."""
    from longstep_kit.local.runner import RunOptions
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.local.workflow_run import load_workflow_scenario, run_workflow_scenario, stack_context, state_machine_arn

    scenario = load_workflow_scenario(RELEASE)
    samples = []
    with LocalStack(context=stack_context(scenario)) as stack:
        assert stack.enforce and stack.enforcement.policies is not None
        sfn = stack.client("stepfunctions")
        machine = state_machine_arn(stack, scenario.workflow)
        for i in range(runs):
            stack.reset_data()
            run_id = f"bench-release-{i:02d}"
            t = time.perf_counter()
            report = run_workflow_scenario(stack, scenario, RunOptions(run_id=run_id, timeout_seconds=300))
            wall = time.perf_counter() - t
            if report["status"] != "SUCCEEDED":
                raise RuntimeError(f"{run_id} ended {report['status']}: {report.get('cause')}")
            executions = [e for e in sfn.list_executions(stateMachineArn=machine, maxResults=1000)["executions"] if e["name"].startswith(run_id)]
            events = [e for ex in sorted(executions, key=lambda x: x["startDate"]) for e in history(sfn, ex["executionArn"])]
            samples.append({"run_id": run_id, "status": report["status"], "wall_seconds": round(wall, 3), **_sleep_window(report, events)})
            samples[-1]["run"] = {
                "virtual_seconds": report["virtual_seconds"],
                "lambda_invocations": report["lambda_invocations"],
                **{k: v for k, v in count(events).items() if k != "event_types"},
            }
            emit(f"release run {i + 1}/{runs}: while sleeping {samples[-1]['during']['state_transitions']} transitions")
    return {"scenario": "events/scenarios/release.json", "runs": runs, "samples": samples}


def _sleep_window(report: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """The 2-day sleep's window: the k-th Wait state entered, k being the 2-day directive's place among the run's waits."""
    waits = report["waits"]
    k = next((n for n, w in enumerate(waits) if w["seconds"] == TWO_DAYS), None)
    entered = [i for i, e in enumerate(events) if e["type"] == "WaitStateEntered"]
    if k is None or k >= len(entered):
        raise RuntimeError(f"no 2-day sleep in the run: waits {waits}, {len(entered)} Wait states entered")
    start = entered[k]
    end = _chain_end(events, start, ("WaitStateExited",))
    return {
        "sleep_seconds": waits[k]["seconds"],
        "state": _entered(events[start]),
        "from_event": events[start]["id"],
        "to_event": events[end]["id"],
        "during": count(events[start + 1 : end]),
        "own_transition": 1,  # entering the Wait state: what the whole sleep is billed
        "dispatcher_invocations_during": waits[k]["lambda_invocations_during"],
    }


def measure(runs: int, emit: Any) -> dict[str, Any]:
    """Both scenarios, ``runs`` times each."""
    started = time.perf_counter()
    doc = {"delegate": measure_delegate(runs, emit), "release": measure_release(runs, emit)}
    doc["wall_seconds"] = round(time.perf_counter() - started, 1)
    return doc


def _values(samples: list[dict[str, Any]], get: Any) -> str:
    return ", ".join(f"{v:,}" for v in sorted({get(s) for s in samples}))


def render(doc: dict[str, Any]) -> list[str]:
    """The issue 14 rows of the waits section (a table beside the waits' own, and how they are measured)."""
    d, r = doc["delegate"]["samples"], doc["release"]["samples"]
    every_zero = all(
        s["parent"]["all_parked"][k] == 0 and all(e["own_branch"][k] == 0 for e in s["parent"]["each"])
        for s in d
        for k in ("lambda_invocations", "state_transitions")
    ) and all(s["during"][k] == 0 and s["dispatcher_invocations_during"] == 0 for s in r for k in ("lambda_invocations", "state_transitions"))
    child = lambda s, k: sum(c[k] for c in s["children"].values())  # noqa: E731
    others = max(e["whole_history"]["state_transitions"] for s in d for e in s["parent"]["each"])
    return [
        "### While a parent waits on a child run, and while a workflow sleeps 2 days (issue 14)",
        "",
        f"The shipped scenarios on the local stack (enforcement on), {doc['delegate']['runs']} runs of each; counted from the waiting "
        "execution's own history between the events where its wait starts and ends (`bench/waits/compose.py`).",
        "",
        "| | parent waiting on its child runs (`delegate.json`) | workflow sleeping 2 days (`release.json`, `ctx.sleep(days=2)`) |",
        "|---|---:|---:|",
        "| the wait: from / to (history events) | the last `DelegateToSubagent` parked (`TaskSubmitted`) / the first child's answer (`TaskSucceeded`) "
        "| `WaitStateEntered` / `WaitStateExited` of the 2-day Wait state |",
        f"| **Lambda invocations during the wait** | **{_values(d, lambda s: s['parent']['all_parked']['lambda_invocations'])}** "
        f"| **{_values(r, lambda s: s['during']['lambda_invocations'])}** |",
        f"| **state transitions during the wait** | **{_values(d, lambda s: s['parent']['all_parked']['state_transitions'])}** "
        f"| **{_values(r, lambda s: s['during']['state_transitions'])}** |",
        f"| history events during the wait | {_values(d, lambda s: s['parent']['all_parked']['history_events'])} "
        f"| {_values(r, lambda s: s['during']['history_events'])} |",
        f"| each delegation, its park to its answer, on its own branch: invocations / transitions "
        f"| {_values(d, lambda s: max(e['own_branch']['lambda_invocations'] for e in s['parent']['each']))} / "
        f"{_values(d, lambda s: max(e['own_branch']['state_transitions'] for e in s['parent']['each']))} | |",
        f"| what the wait itself is billed | {_values(d, lambda s: s['parent']['delegation_transitions'])} transitions and "
        f"{_values(d, lambda s: s['parent']['delegations'])} invocations (entering `DelegateToSubagent`, whose Lambda starts the child; one per child) "
        f"| 1 transition (entering the Wait state) |",
        f"| meanwhile, elsewhere | the children, in their own executions: {_values(d, lambda s: child(s, 'lambda_invocations'))} invocations, "
        f"{_values(d, lambda s: child(s, 'state_transitions'))} transitions | nothing: the dispatcher started "
        f"{_values(r, lambda s: s['dispatcher_invocations_during'])} invocations of the workflow in the 2 virtual days |",
        f"| the whole run: Lambda invocations / state transitions | parent {_values(d, lambda s: s['parent']['run']['lambda_invocations'])} / "
        f"{_values(d, lambda s: s['parent']['run']['state_transitions'])} | {_values(r, lambda s: s['run']['lambda_invocations'])} / "
        f"{_values(r, lambda s: s['run']['state_transitions'])} ({_values(r, lambda s: int(s['run']['virtual_seconds']))} virtual s) |",
        "",
        f"- 0 invocations and 0 transitions in every window of every run: {'yes' if every_zero else 'NO (see waits.json)'}.",
        "- Counted as AWS bills them: a state transition is a state entered (`*StateEntered`; Step Functions Standard bills "
        "state transitions, https://aws.amazon.com/step-functions/pricing/), an invocation a `LambdaFunctionScheduled` or a "
        "`TaskScheduled` of a `lambda` resource. The Wait state's entry, before the window, is the one transition the 2 days cost.",
        "- The delegations run in the turn's ToolCalls Map, side by side: the parent has nothing in flight from the last one parking "
        "to the first answer (the row in bold). Inside one delegation's own window the parent's history also holds the other one's "
        f"events (up to {others} transitions: its park, or its CallTool once its child answered), never this one's: its branch "
        "(the `previousEventId` chain) goes from `TaskSubmitted` straight to `TaskSucceeded`.",
        "- The sleep is found by its events (the Wait state entered for the run's 2-day directive), not by its position: the "
        "workflow's steps may change. The dispatcher's count (the workflow's invocations started on the virtual clock between "
        "the sleep's start and end) agrees.",
    ]
