"""The state machine definition of the agent loop (docs/design.md §1).

BindAgent -> Init -> ModelTurn -> Route -> ToolCalls (Map: [RequestApproval ->] CallTool) -> ModelTurn ...
                                         -> CallOneTool (a turn's one call that waits for nothing) -> ModelTurn ...
                           -> Finish -> Done
A failure that retries cannot fix on ModelTurn, CallTool, CallOneTool, Init, Finish, ContinueAsNew
or a call's RequestApproval or WaitForEvent parks on an Escalate task (a task token: no compute while a human decides) and comes back to the same step,
or aborts the run; a start input Init refuses fails the run at once (docs/failures.md).
The state carries a cursor (run id, next turn, the turn's call indices), never the transcript.

Each agent's tool code runs in functions of its own (its CallTool and CheckCondition, whose roles
hold only that agent's grants). BindAgent, the first state, picks the run's agent from the start
input and stores those two functions' ARNs in workflow variables; the CallTool and CheckCondition
tasks invoke the function a variable names (``FunctionName.$``). Variables assigned at the top
level are readable inside the Map's iterations, and every execution (a continue-as-new one too)
starts at BindAgent:
https://docs.aws.amazon.com/step-functions/latest/dg/workflow-variables.html
A start input naming no registered agent goes straight to Init, which rejects it.

This module chains the states; the states of one concept live in modules of their own:
``loop_tasks`` (the functions behind the tasks, and how a task invokes one), ``loop_humans``
(approvals, escalations), ``loop_waits`` (timers, events, conditions, subagent calls), and
``history_budget`` (the events a turn adds, which set the turns per execution).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep.errors import SignalTakenError, start_rejection_error_names
from longstep.fleet import FleetSettings
from longstep.subagents import SUBAGENT_WAIT
from longstep_kit.constructs.loop_fleet import fleet_states
from longstep_kit.constructs.loop_humans import approval, escalation
from longstep_kit.constructs.loop_tasks import (
    CALL_TOOL_VARIABLE,
    CHECK_CONDITION_VARIABLE,
    MODEL_TURN_VARIABLE,
    AgentTaskFunctions,
    LoopFunction,
    LoopFunctions,
    invoke,
    invoke_agent_function,
    has_own_model_turn,
    model_turn_task,
)
from longstep_kit.constructs.loop_waits import CONDITION_HANDOVER_ERROR, condition_wait, delegation, event_wait, timer_wait
from longstep_kit.retry import RetryPolicies


def build_definition(
    scope: Construct,
    fns: LoopFunctions,
    *,
    approval_timeout: Duration,
    escalation_timeout: Duration = Duration.days(7),
    max_concurrency: int,
    retry: RetryPolicies | None = None,
    subagent_timeout: Duration = Duration.days(7),
    fleet: FleetSettings | None = None,
) -> sfn.IChainable:
    """The loop's states, chained. ``retry`` gives each step kind its transient-error budget;
    ``fleet`` adds the concurrency slot and rate limit states (``loop_fleet``; None: none)."""
    policies = retry or RetryPolicies()
    retry = policies.bookkeeping
    init = invoke(scope, "Init", fns.init_run, retry, comment="Create or resume the run; find the first unfinished turn")
    # A start input Init refuses fails the run at once with Init's own error and its one-line
    # cause (a human's retry could not fix the input); anything else Init cannot get past escalates.
    # ErrorPath/CausePath: https://docs.aws.amazon.com/step-functions/latest/dg/state-fail.html
    rejected = sfn.Fail(scope, "InitRejected", error_path="$.error.Error", cause_path="$.error.Cause", comment="The start input was refused")
    init.add_catch(rejected, errors=start_rejection_error_names(), result_path="$.error")
    escalation(scope, "Init", init, fns, retry, escalation_timeout)
    cursor = {name: f"$.{name}" for name in ("run_id", "next_turn", "resolution", "generation", "generation_start")}
    # The service's clock, not a handler's: a turn's timers are set from it
    # (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-contextobject.html).
    cursor["entered_at"] = "$$.State.EnteredTime"
    model_turn = model_turn_task(scope, fns, policies.model, cursor, "Replay or make this turn's model call")
    escalation(scope, "ModelTurn", model_turn, fns, retry, escalation_timeout)
    gates = fleet_states(scope, fns.fleet, fleet, retry)
    ask_model = gates.before_model(model_turn) if gates else model_turn  # each new turn draws from the rate limit
    call_tool = invoke_agent_function(
        scope,
        "CallTool",
        CALL_TOOL_VARIABLE,
        policies.tool,
        fns.call_tool_timeout,
        "Replay or run one tool call",
        OutputPath="$.Payload",
    )
    # A turn whose one call waits for nothing runs it here, without the Map and its Dispatch: two
    # state transitions fewer a turn (docs/cost.md). Its input is ModelTurn's output, which then
    # names the call (run_id, turn, call, tool); its output is the next ModelTurn's cursor.
    call_one_tool = invoke_agent_function(
        scope,
        "CallOneTool",
        CALL_TOOL_VARIABLE,
        policies.tool,
        fns.call_tool_timeout,
        "Replay or run the turn's one tool call (it waits for nothing): no Map",
        # The next ModelTurn's cursor, and nothing that names a call: a ModelTurn that fails after
        # it escalates as a model turn (longstep.tasks.escalate.escalate).
        ResultSelector={
            "run_id.$": "$.Payload.run_id",
            "next_turn.$": "$.Payload.next_turn",
            "resolution.$": "$.Payload.resolution",
            "generation.$": "$.Payload.generation",
            "generation_start.$": "$.Payload.generation_start",
        },
    )
    escalation(scope, "CallOneTool", call_one_tool, fns, retry, escalation_timeout)
    # Each call first waits for what it needs (a human's decision, a time, an event, a condition,
    # a child run), holding no compute, then CallTool records its result.
    # The order of the edges into a state is the order of its states in the synthesized definition
    # (CDK walks the graph through them), so the waits are built first and chained here, in the
    # order the definition has always had: another order changes the template (not the golden
    # ASL, which is compared with sorted keys).
    request_approval = approval(scope, fns.request_approval, retry, approval_timeout, call_tool)
    wait_timer = timer_wait(scope)
    wait_event = event_wait(scope, fns.wait_for_event, retry, call_tool)
    # A signal another parallel wait on the event consumed first (its sender's lost response put
    # it back): the call parks on the event again (longstep.humans.signals.received). Before the
    # escalation's States.ALL, which must be the last catcher.
    call_tool.add_catch(wait_event, errors=[SignalTakenError.error_name()], result_path="$.signal")
    escalation(scope, "CallTool", call_tool, fns, retry, escalation_timeout)
    # A wait that fails for good (not its timeout, caught before) escalates; a retry parks the
    # call on the same wait again, an abort fails the Map and with it the run.
    escalation(scope, "RequestApproval", request_approval, fns, retry, escalation_timeout)
    escalation(scope, "WaitForEvent", wait_event, fns, retry, escalation_timeout)
    check_condition = condition_wait(scope, fns.check_condition_timeout, retry, call_tool)
    dispatch = (
        sfn.Choice(scope, "Dispatch")
        .when(sfn.Condition.boolean_equals("$.approval", True), request_approval.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "timer"), wait_timer.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "event"), wait_event.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "condition"), check_condition)
    )
    if fns.delegate is not None:
        dispatch.when(
            sfn.Condition.string_equals("$.wait", SUBAGENT_WAIT),
            delegation(scope, fns.delegate, retry, subagent_timeout, call_tool),
        )
    dispatch.otherwise(call_tool)
    tool_calls = sfn.Map(
        scope,
        "ToolCalls",
        items_path="$.calls",
        max_concurrency=max_concurrency,
        result_path=sfn.JsonPath.DISCARD,
        comment="One CallTool per tool call of the turn; results live in the checkpoint table",
    )
    tool_calls.item_processor(dispatch)
    finish = invoke(scope, "Finish", fns.finish, retry, comment="Record and return the final answer")
    escalation(scope, "Finish", finish, fns, retry, escalation_timeout)
    # Before the history could reach 25,000 events, a fresh execution takes the run over.
    continue_as_new = invoke(
        scope,
        "ContinueAsNew",
        fns.continue_as_new,
        retry,
        payload=sfn.TaskInput.from_object(
            {
                "cursor": sfn.JsonPath.entire_payload,
                "state_machine_arn": sfn.JsonPath.state_machine_id,
                "execution_name": sfn.JsonPath.execution_name,
                # Which state machine version this execution runs (longstep.pinning).
                "execution_arn": sfn.JsonPath.execution_id,
            }
        ),
        comment="Start the run's next execution; it resumes from the checkpoint log",
    )
    escalation(scope, "ContinueAsNew", continue_as_new, fns, retry, escalation_timeout)
    # A condition wait that would pass the history limit: a fresh execution takes the run over;
    # its Init resumes at this turn (its calls are not all recorded) and the wait goes on.
    tool_calls.add_catch(continue_as_new, errors=[CONDITION_HANDOVER_ERROR], result_path="$.handover")
    # A paused run parks here on a task token (no compute, no transitions) until resumed, then
    # asks ModelTurn again (longstep.steering).
    pause = invoke(
        scope,
        "Pause",
        fns.pause,
        retry,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object({"run_id": sfn.JsonPath.string_at("$.run_id"), "token": sfn.JsonPath.task_token}),
        result_path=sfn.JsonPath.DISCARD,
        comment="Paused: parked on a task token until longstep resume hands it back",
    )
    done = sfn.Succeed(scope, "Done")
    route = (
        sfn.Choice(scope, "Route")
        .when(sfn.Condition.string_equals("$.route", "tools"), tool_calls.next(ask_model))
        .when(sfn.Condition.string_equals("$.route", "tool"), call_one_tool.next(ask_model))
        .when(sfn.Condition.string_equals("$.route", "correct"), ask_model)  # feedback, then ask again
    )
    if has_own_model_turn(fns.agents):  # a turn whose calls all ran in ModelTurn (longstep.tasks.inline_tools)
        route.when(sfn.Condition.string_equals("$.route", "inline"), ask_model)
    (
        route.when(sfn.Condition.string_equals("$.route", "continue"), continue_as_new.next(sfn.Succeed(scope, "HandedOver")))
        .when(sfn.Condition.string_equals("$.route", "pause"), pause.next(ask_model))
        .otherwise(finish.next(gates.before_end(done) if gates else done))
    )
    if gates:
        init.next(gates.after_init(ask_model))
        model_turn.next(route)
    else:
        init.next(model_turn).next(route)
    return _bind_agent(scope, fns.agents, init, fns.model_turn)


def _agent_variables(agents: dict[str, AgentTaskFunctions], model_turn: LoopFunction) -> dict[str, dict[str, str]]:
    """Each agent's workflow variables: its tool functions, and its ModelTurn when any agent has one."""
    own_model_turn = has_own_model_turn(agents)
    variables = {}
    for name, functions in agents.items():
        variables[name] = {CALL_TOOL_VARIABLE: functions.call_tool.function_arn, CHECK_CONDITION_VARIABLE: functions.check_condition.function_arn}
        if own_model_turn:
            variables[name][MODEL_TURN_VARIABLE] = (functions.model_turn or model_turn.fn).function_arn
    return variables


def _bind_agent(scope: Construct, agents: dict[str, AgentTaskFunctions], init: sfn.IChainable, model_turn: LoopFunction) -> sfn.Choice:
    """The first state: the run's agent's functions into workflow variables, then Init.

    A Choice rule on a field the input lacks is a runtime error, so a start input without
    ``agent`` is sent on first, for Init to reject with a message naming the field.
    """
    bind = sfn.Choice(scope, "BindAgent", comment="Store the run's agent's tool functions in variables")
    bind.when(sfn.Condition.not_(sfn.Condition.is_present("$.agent")), init)
    for name, variables in sorted(_agent_variables(agents, model_turn).items()):
        evaluating = agents[name].call_tool_eval
        if evaluating is not None:  # an eval run (docs/evals.md): its calls go to a CallTool that cannot write
            bind_eval = sfn.Pass(scope, f"BindEval-{name}", assign={**variables, CALL_TOOL_VARIABLE: evaluating.function_arn})
            bind.when(sfn.Condition.and_(sfn.Condition.is_present("$.eval"), sfn.Condition.string_equals("$.agent", name)), bind_eval.next(init))
        assign = sfn.Pass(scope, f"BindAgent-{name}", assign=variables)
        bind.when(sfn.Condition.string_equals("$.agent", name), assign.next(init))
    return bind.otherwise(init)
