"""The Longstep error family and its Step Functions names.

Step Functions matches error names exactly, with no notion of inheritance, and a Python Lambda
reports an uncaught exception under its class name. So the Retry and Catch lists in the state
machine are generated here, from the classes, and cannot drift from the code that raises them.
Every error the runtime raises is defined here, so the lists never depend on what is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic is imported by the modules that validate, not by every error
    from pydantic import ValidationError


def describe_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the field by its dotted path."""
    lines = []
    for err in exc.errors():
        path = ".".join(str(part) for part in err["loc"]) or "(root)"
        lines.append(f"{prefix}{path}: {err['msg']}")
    return "; ".join(lines)


class LongstepError(Exception):
    """Base class of every error Longstep raises on purpose."""

    @classmethod
    def error_name(cls) -> str:
        """The name Step Functions sees when a Lambda raises this error."""
        return cls.__name__


# --- transient: Step Functions retries with backoff -------------------------------------------


class TransientError(LongstepError):
    """A failure that may succeed when tried again (throttling, timeouts, 5xx)."""


class ThrottledError(TransientError):
    """A downstream service (model or tool) asked us to slow down."""


class ServiceUnavailableError(TransientError):
    """A downstream service answered with a server-side error or timed out."""


class StepInProgressError(TransientError):
    """Another invocation holds the lock on this step; try again after it finishes or expires."""


# --- permanent: no retry --------------------------------------------------------------------


class PermanentError(LongstepError):
    """A failure that will not go away by retrying (bad input, access denied, missing resource)."""


class InvalidInputError(PermanentError):
    """The start input or a Lambda event is malformed; the message names the field."""


class UnknownAgentError(InvalidInputError):
    """The start input names an agent that is not registered."""


class StepRecordLostError(PermanentError):
    """A record the run wrote is gone (a step whose lock says it completed, a reply or a result a
    replay needs): missing, not different (that is ``NonDeterminismError``); a human must decide."""


class RunConflictError(PermanentError):
    """A run id was reused with a different agent or goal."""


class NonDeterminismError(PermanentError):
    """A replayed step's recorded kind or name differs from what the code asks for."""


class UnknownWorkflowError(InvalidInputError):
    """The start input names a workflow that is not registered."""


class WorkflowFailedError(PermanentError):
    """A workflow function raised: the run ends failed with the error it raised."""


class ScriptExhaustedError(PermanentError):
    """The scripted model has no reply for the requested turn."""


class ModelAccessError(PermanentError):
    """The model provider refused the request (access denied, validation, unknown model)."""


class ToolFailedError(PermanentError):
    """A tool raised an error that retrying will not fix."""


class CorrectionBudgetError(PermanentError):
    """The model kept making mistakes past its budget of consecutive corrections."""


class VerifierBudgetError(PermanentError):
    """The final answer kept failing the verifier past its budget."""


class OutcomeUnknownError(PermanentError):
    """An at-most-once tool was interrupted after it may have acted: a human must say what happened."""


class RecordTooLargeError(PermanentError):
    """A record would not fit in a DynamoDB item; it must be offloaded first."""


class RecordSchemaError(PermanentError):
    """A checkpoint record has a schema version this code cannot read (newer, or malformed)."""


class BadRequestError(InvalidInputError):
    """A malformed approval API request; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class ArgumentsRefusedError(BadRequestError):
    """Edited arguments the tool's schema refuses: one plain message per argument (``fields``,
    argument name to message), the first named in ``field`` (``input.<name>``)."""

    def __init__(self, fields: dict[str, str]) -> None:
        (first, message), *rest = fields.items()
        super().__init__(f"input.{first}", "; ".join([message, *(f"input.{name}: {text}" for name, text in rest)]))
        self.fields = dict(fields)


# --- model errors: told to the model as a corrective tool result, never raised to Step Functions


class ModelError(LongstepError):
    """The model asked for something invalid (unknown tool, arguments failing the schema)."""


class UnknownToolError(ModelError):
    """The model called a tool that the agent does not have."""


class ToolArgumentsError(ModelError):
    """The model's tool arguments fail the tool's schema."""


class ToolInputError(ModelError):
    """A tool found the model's (schema-valid) request wrong: an unknown id, say."""


# --- humans: answers of the approval API and the CLI, never raised in a state machine task ------


class NoIdentityError(LongstepError):
    """The request carries no caller identity (the method is not IAM-authorized)."""


class ApprovalNotFoundError(LongstepError):
    """No approval request with this id."""


class ApprovalAlreadyDecidedError(LongstepError):
    """The request was decided before; the first decision stands (``decision``, ``status``)."""

    def __init__(self, message: str, decision: dict[str, Any], status: str) -> None:
        super().__init__(message)
        self.decision = decision
        self.status = status


class ApprovalStaleError(LongstepError):
    """The decision was made on arguments that are no longer the request's (a stale page, a
    request asked again with changed arguments): nothing was decided (``digest``: the request's now)."""

    def __init__(self, message: str, digest: str | None) -> None:
        super().__init__(message)
        self.digest = digest


class ApprovalExpiredError(LongstepError):
    """The request timed out before anyone decided; the model was told so."""


class LinkError(LongstepError):
    """A signed approval link (``longstep.links``) that grants nothing."""


class InvalidLinkError(LinkError):
    """Malformed, or its MAC does not verify (forged, altered, or signed by a retired key)."""


class ExpiredLinkError(LinkError):
    """The link was genuine, but its expiry has passed (``capability``: what it granted)."""

    def __init__(self, message: str, capability: Any = None) -> None:
        super().__init__(message)
        self.capability = capability


class LinkKeyError(LongstepError):
    """The key that signs approval links could not be read, or is too short."""


class RotationError(LongstepError):
    """A rotation request for the link key does not match the secret's versions."""


class SignalTakenError(LongstepError):
    """The signal a wait was handed was consumed by another wait of the run first (its sender's
    answer reached both: a lost response to one of two parallel waits on one event); the
    state machine parks this wait again (a Catch of CallTool back to WaitForEvent)."""


class SignalRefusedError(LongstepError):
    """A signal nobody could ever take: its run does not exist or has finished, or the run's agent
    declares the events it waits on and this is not one; ``field`` names what is wrong and
    ``status`` is the HTTP status the approval API answers with (404, 409 or 422)."""

    def __init__(self, field: str, message: str, status: int) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.status = status


class WaitNotFoundError(LongstepError):
    """No parked record with this id."""


class WaitClosedError(WaitNotFoundError):
    """The record was pending, but its wait is over: the answer reached no execution."""


class AlreadyDecidedError(LongstepError):
    """The record was answered before; the first answer stands (carried in ``decision``)."""

    def __init__(self, message: str, decision: dict[str, Any]) -> None:
        super().__init__(message)
        self.decision = decision


class UnknownProviderError(InvalidInputError):
    """The run or the agent names a model provider that is not registered, or misconfigured."""


class McpAuthError(PermanentError):
    """An MCP server refused the credential (HTTP 401 or 403): retrying will not fix it."""


class McpProtocolError(PermanentError):
    """An MCP server answered with something the protocol does not allow, or refused the request."""


class ModelStoppedError(PermanentError):
    """The model stopped for a reason another try cannot fix (a human must decide)."""


def _leaf_names(base: type[LongstepError]) -> list[str]:
    """``base`` and its subclasses defined in this module, by Step Functions name.

    Only this module's classes count: a subclass defined elsewhere (an agent's, the kit's) would
    make the lists depend on what happens to be imported when the state machine is synthesized.
    """
    names: list[str] = []
    pending = [base]
    while pending:
        cls = pending.pop()
        if cls.__module__ == __name__:
            names.append(cls.error_name())
        pending.extend(cls.__subclasses__())
    return sorted(set(names))


# Errors the Lambda service itself reports, and what a crashed or timed-out invocation looks like.
# https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html: Lambda's
# transient 500s, its throttle, and Lambda.Unknown (an unhandled failure: out of memory, a timeout).
LAMBDA_SERVICE_ERRORS = (
    "Lambda.Unknown",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Sandbox.Timedout",
    "Runtime.ExitError",
)


def lock_wait_error_names() -> list[str]:
    """Errors that mean 'another invocation holds this step': retried on a budget of their own."""
    return _leaf_names(StepInProgressError)


def retryable_error_names() -> list[str]:
    """Error names for the transient Retry block: every transient class plus Lambda's own.

    Lock waits are left out: they get their own retrier (see ``lock_wait_error_names``).
    """
    return sorted((set(_leaf_names(TransientError)) | set(LAMBDA_SERVICE_ERRORS)) - set(lock_wait_error_names()))


def permanent_error_names() -> list[str]:
    """Error names that must never be retried."""
    return _leaf_names(PermanentError)


def start_rejection_error_names() -> list[str]:
    """Errors of a start input Init refuses (a malformed field, an unknown agent, a reused run id):
    the run fails at once with its one-line error; a human's retry could not fix the input."""
    return sorted(set(_leaf_names(InvalidInputError)) | {RunConflictError.error_name()})
