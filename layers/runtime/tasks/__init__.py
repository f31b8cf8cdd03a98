"""The state machine's tasks, one module per step, named as the step's handler file
(``longstep_functions.<module>``) and its function construct (``functions/`` and
``longstep_kit.constructs.durable_agent``).

Each task takes its small JSON input (a cursor into the checkpoint log), does one durable step,
and returns the next cursor; the transcript never travels through Step Functions.

- ``init_run``: Init (function InitRun), creates the run (or attaches to it) and finds where to resume.
- ``model_turn``: ModelTurn, replays or makes a turn's model call, and routes on the reply.
- ``inline_tools``: a ModelTurn's read tools run inside its invocation (``Agent.inline_read_tools``).
- ``call_tool``: CallTool (and CallOneTool), replays or runs one tool call of a turn.
- ``request_approval``: RequestApproval, a decision on a tool call asked of a human.
- ``escalate``: Escalate (the Escalate<Step> states), a step retries could not fix, parked for a human.
- ``wait_for_event``: WaitForEvent, a ``wait_for`` call parked until its event.
- ``check_condition``: CheckCondition, one check of a ``wait_for`` condition.
- ``delegate_to_subagent``: DelegateToSubagent, a child run started and the call parked on it.
- ``child_failed``: ChildFailed (the <Step>TellParent states), a failing child run tells its parent.
- ``finish``: Finish, the run's final answer.
- ``continue_as_new``: ContinueAsNew, the run's next execution.
- ``pause``: Pause, a paused run parked until resumed.
- ``fleet_gate``: FleetGate (AcquireSlot, ReleaseSlot, DrawRate), the fleet's concurrency slots and rate limit.
- ``common``: what several tasks read (the run record, a turn's tool use, the records' renewal).
"""
