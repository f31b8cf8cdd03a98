"""The agent loop's human states: approvals of tool calls, and escalations of failed steps.

Both park the run on a task token (no compute while a human decides). An approval's answer, or
its timeout, goes to CallTool as the call's decision. An escalation catches what retries could
not fix on a step (ModelTurn, CallTool, CallOneTool, Init, Finish, ContinueAsNew, and a call's
RequestApproval and WaitForEvent): a human retries the step, skips it (ModelTurn and CallTool
only) or aborts the run.
Task tokens: https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-wait-token
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longstep_kit.constructs.loop_tasks import LoopFunction, LoopFunctions, invoke
from longstep_kit.retry import RetryPolicy

ABORTED_ERROR = "EscalationAborted"
UNANSWERED_ERROR = "EscalationTimedOut"


def wait_for_human(
    scope: Construct,
    cid: str,
    target: LoopFunction,
    retry: RetryPolicy,
    result_path: str,
    timeout: Duration,
    comment: str,
    **fields: str,
) -> tasks.LambdaInvoke:
    """A task handing ``target`` the state and a task token; the human's answer lands at ``result_path``.

    ``fields`` go into the payload as they are (an escalation names its failed step).
    """
    return invoke(
        scope,
        cid,
        target,
        retry,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object({"item": sfn.JsonPath.entire_payload, "token": sfn.JsonPath.task_token, **fields}),
        result_path=result_path,
        task_timeout=sfn.Timeout.duration(timeout),
        comment=comment,
    )


def approval(scope: Construct, target: LoopFunction, retry: RetryPolicy, timeout: Duration, call_tool: sfn.IChainable) -> tasks.LambdaInvoke:
    """RequestApproval, its decision at ``$.decision``; the caller chains it to ``call_tool``,
    where a timeout goes too (``agent_loop`` says why the caller makes that edge)."""
    request_approval = wait_for_human(
        scope, "RequestApproval", target, retry, "$.decision", timeout, "Wait, holding no compute, for a human's decision on this call"
    )
    # No decision in time: the model is told, as the call's result.
    approval_timed_out = sfn.Pass(scope, "ApprovalTimedOut", result=sfn.Result.from_object({"decision": "timeout"}), result_path="$.decision")
    request_approval.add_catch(approval_timed_out, errors=["States.Timeout"], result_path="$.error")
    approval_timed_out.next(call_tool)
    return request_approval


def escalation(
    scope: Construct, prefix: str, failing: sfn.TaskStateBase | sfn.CustomState, fns: LoopFunctions, retry: RetryPolicy, timeout: Duration
) -> None:
    """Catch everything retries could not fix on ``failing``: a human retries, skips or aborts.

    Any answer but ``abort`` goes back to ``failing`` (a skip's result is used by the steps that
    have one: ModelTurn and CallTool; the other steps refuse a skip, ``longstep.humans.escalations``).
    The Escalate task is told the failed step's name (``step``): its record names it.
    """
    escalate = wait_for_human(
        scope, f"Escalate{prefix}", fns.escalate, retry, "$.resolution", timeout, "Park the failed step until a human answers", step=prefix
    )
    aborted: sfn.IChainable = sfn.Fail(scope, f"{prefix}Aborted", error=ABORTED_ERROR, cause="a human aborted the run at an escalation")
    # Nobody answered within the escalation timeout: the run fails with an error of its own (the
    # escalation record stays, and `longstep resume` starts the run again from its checkpoints).
    unanswered: sfn.IChainable = sfn.Fail(
        scope, f"{prefix}Unanswered", error=UNANSWERED_ERROR, cause="no human answered the escalation before it timed out"
    )
    if fns.child_failed is not None:
        # A subagent's run tells its parent's waiting call before it fails (a top-level run: a no-op),
        # aborted or unanswered: the parent would otherwise wait for its call's own timeout.
        tell = invoke(scope, f"{prefix}TellParent", fns.child_failed, retry, comment="A child run tells its parent's call that it failed")
        tell.add_catch(aborted, errors=["States.ALL"], result_path="$.error")  # the run fails all the same
        aborted = tell.next(aborted)
        tell_unanswered = invoke(
            scope,
            f"{prefix}TellParentUnanswered",
            fns.child_failed,
            retry,
            payload=sfn.TaskInput.from_object({"run_id": sfn.JsonPath.string_at("$.run_id"), "error": {"Error": UNANSWERED_ERROR}}),
            result_path=sfn.JsonPath.DISCARD,
            comment="A child run whose escalation nobody answered tells its parent's call that it failed",
        )
        tell_unanswered.add_catch(unanswered, errors=["States.ALL"], result_path="$.escalation_error")
        unanswered = tell_unanswered.next(unanswered)
    escalate.add_catch(unanswered, errors=["States.Timeout"], result_path="$.escalation_error")
    resolved = sfn.Choice(scope, f"{prefix}Resolved").when(sfn.Condition.string_equals("$.resolution.action", "abort"), aborted).otherwise(failing)
    failing.add_catch(escalate, errors=["States.ALL"], result_path="$.error")
    escalate.next(resolved)
