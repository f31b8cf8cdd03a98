"""Logs, traces and metrics of one Lambda invocation, with Powertools, loaded lazily.

Every log line carries the run id, the turn and (for a tool call) the call index of the task it
belongs to. Nothing from the event is logged but those routing fields: task tokens and tool
arguments never reach a log line, and values marked secret (``logs.mark_secret``; the handler marks
each task token) are masked in every line as a second guard.

Output goes where the Lambda runtime ships it (stdout, to CloudWatch Logs) only when running in
Lambda. Elsewhere (tests, the local stack, a notebook) the runtime prints nothing: log records
propagate to Python's ``logging`` for the host to route, and metrics are not serialized.

Observability never fails a step: a metric or trace that cannot be written is dropped.

- ``logs``: the logger, where output goes, and the masking of secrets.
- ``metrics``: the metric names the dashboard reads, and one invocation's metrics as EMF lines.
- ``tracing``: the X-Ray tracer, when there is one, and a task's subsegment.
- ``invocation``: ``observe``, the context a handler runs one task in.
"""
