"""The state machine's tasks, one module per concept.

Each task takes its small JSON input (a cursor into the checkpoint log), does one durable step,
and returns the next cursor; the transcript never travels through Step Functions.

- ``start``: Init, creates the run (or attaches to it) and finds where to resume.
- ``model_turn``: ModelTurn, replays or makes a turn's model call, and routes on the reply.
- ``tool_call``: CallTool, replays or runs one tool call of a turn.
- ``waits``: WaitForEvent and CheckCondition, the waits of ``wait_for``.
- ``humans``: RequestApproval and Escalate, the waits for a human.
- ``finish``: Finish, the run's final answer.
- ``continue_as_new``: ContinueAsNew, the run's next execution.
- ``common``: what several tasks read (the run record, a turn's tool use, the task token).
"""
