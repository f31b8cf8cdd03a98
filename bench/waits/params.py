"""What the waits bench measures: its waits, shared by the run and its report."""

WAIT_SECONDS = 3 * 86_400
EVENT_TIMEOUT_SECONDS = 4 * 86_400  # the wait_for's own timeout: longer than the 3 days it waits
KINDS = ("approval", "event")
EVENT = "ci_finished"
