"""AWS's size and count limits on the local stack, failing with the error AWS gives.

What moto already enforces is left to moto and tested (tests/local/test_fidelity_limits.py): a state's or
a Lambda task's output above 256 KiB fails the execution with ``States.DataLimitExceeded``
(moto/stepfunctions/parser/quotas.py), a DynamoDB item above 400 KB is a ``ValidationException``.
This module adds the API checks moto skips, the Lambda response limit, and the history limit
(patched into the engine by :mod:`longstep_kit.local.moto_patches`).
"""

from __future__ import annotations

import re
from typing import Any

# https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
# "Maximum input or output size for a task, state, or execution: 256 KiB of data as a UTF-8
# encoded string"; execution names "must be 80 characters or fewer"; "Maximum execution history
# size: 25,000 events in a single state machine execution history".
MAX_PAYLOAD_BYTES = 256 * 1024
MAX_EXECUTION_NAME = 80
MAX_HISTORY_EVENTS = 25_000
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
# "Invocation payload (request and response): 6 MB each for request and response (synchronous)".
MAX_LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html (enforced by moto).
MAX_DYNAMODB_ITEM_BYTES = 400 * 1024

# https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html: a name
# must not contain white space, brackets, wildcards, special characters or control characters.
_BAD_NAME = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")


class LimitError(Exception):
    """A call AWS refuses; converted by the hook into the service's ClientError."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def utf8_size(text: str | bytes | None) -> int:
    if text is None:
        return 0
    return len(text) if isinstance(text, bytes) else len(text.encode("utf-8"))


def check_call(service: str, operation: str, params: dict[str, Any]) -> None:
    """Raise :class:`LimitError` for a Step Functions call AWS would refuse on its parameters."""
    if service != "states":
        return
    if operation == "StartExecution":
        name = params.get("name")
        if name is not None and (not 1 <= len(name) <= MAX_EXECUTION_NAME or _BAD_NAME.search(name)):
            raise LimitError("InvalidName", f"Invalid Name: '{name}'")
        if utf8_size(params.get("input")) > MAX_PAYLOAD_BYTES:
            # The API's length constraint (262144); a constraint violation is a ValidationException
            # (https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html).
            raise LimitError(
                "ValidationException",
                "1 validation error detected: Value at 'input' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_PAYLOAD_BYTES}",
            )
    if operation == "SendTaskSuccess" and utf8_size(params.get("output")) > MAX_PAYLOAD_BYTES:
        # https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html
        # (output: "Maximum length of 262144").
        raise LimitError(
            "ValidationException",
            "1 validation error detected: Value at 'output' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_PAYLOAD_BYTES}",
        )


def lambda_response_error(payload: bytes) -> dict[str, str] | None:
    """The function error Lambda reports for a response above its synchronous limit (else None)."""
    if len(payload) <= MAX_LAMBDA_RESPONSE_BYTES:
        return None
    return {
        "errorType": "Function.ResponseSizeTooLarge",
        "errorMessage": f"Response payload size exceeded maximum allowed payload size ({MAX_LAMBDA_RESPONSE_BYTES} bytes).",
    }
