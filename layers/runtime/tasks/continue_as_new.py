"""ContinueAsNew: before an execution's history nears 25,000 events, a fresh one takes the run over."""

from __future__ import annotations

import json
from typing import Any

from longstep import events, executions, pinning
from longstep.errors import InvalidInputError
from longstep.inputs import parse_model
from longstep.contract.cursor import Cursor
from longstep.contract.steps import ContinueOutput
from longstep.runtime import Runtime
from longstep.tasks.common import load_run


def continue_as_new(rt: Runtime, event: Any) -> ContinueOutput:
    """ContinueAsNew: start the run's next execution (generation + 1), which resumes from the log.

    The next execution runs on the run's pinned state machine version unless the alias's
    current version declares the run's code version compatible (``longstep.pinning``).
    The execution name is deterministic (``<run_id>--g<generation>``): a retried invocation
    starts nothing new (Step Functions treats the same name and input as the same execution).
    """
    if not isinstance(event, dict) or not isinstance(event.get("state_machine_arn"), str):
        raise InvalidInputError("state_machine_arn: the state machine's ARN is required")
    if not isinstance(event.get("execution_name"), str):
        raise InvalidInputError("execution_name: the current execution's name is required")
    cursor = parse_model(Cursor, event.get("cursor"), "continue-as-new cursor")
    run = load_run(rt, cursor.run_id)
    generation = cursor.generation + 1
    payload = {
        "run_id": cursor.run_id,
        "goal": run.goal,
        "agent": run.agent,
        "max_turns": int(run.max_turns or 0),
        "model": run.model,
        "turns_per_execution": int(run.turns_per_execution or rt.settings.turns_per_execution),
        "generation": generation,
        # An eval run's next execution binds the eval's CallTool too (BindAgent reads the input).
        **({"eval": run.eval} if run.eval is not None else {}),
    }
    name = executions.generation_name(executions.first_name(event["execution_name"]), generation)
    sfn = rt.step_functions()
    execution = event.get("execution_arn")
    target = pinning.next_version(sfn, event["state_machine_arn"], execution if isinstance(execution, str) else None, run.code_version)
    try:
        arn = sfn.start_execution(stateMachineArn=target.arn, name=name, input=json.dumps(payload))["executionArn"]
    except sfn.exceptions.ExecutionAlreadyExists:  # started by an earlier attempt of this task
        arn = executions.execution_arn(pinning.unqualified(event["state_machine_arn"]), name)
    rt.events.emit(cursor.run_id, events.RUN_CONTINUED, generation=generation, next_turn=cursor.next_turn, execution=name)
    return {"run_id": cursor.run_id, "continued_as": arn, "generation": generation, "next_turn": cursor.next_turn}
