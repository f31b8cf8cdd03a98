"""Sort botocore and provider errors into Longstep's failure classes, in one place."""

from __future__ import annotations

from typing import Any

from longstep.errors import (
    LongstepError,
    ModelAccessError,
    ServiceUnavailableError,
    ThrottledError,
    ToolFailedError,
)

THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "ServiceQuotaExceededException",
    }
)
UNAVAILABLE_CODES = frozenset(
    {
        "ServiceUnavailableException",
        "ServiceUnavailable",
        "InternalServerException",
        "InternalFailure",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "RequestTimeout",
    }
)


def classify_client_error(exc: Any, *, model: bool) -> LongstepError:
    """Translate a botocore ``ClientError`` into a transient or permanent Longstep error.

    Args:
        exc: the botocore ``ClientError``.
        model: True when the call was to the model provider (permanent errors become
            ``ModelAccessError``), False for a tool's own call (``ToolFailedError``).
    """
    error = exc.response.get("Error", {})
    code = error.get("Code", "")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    message = f"{code}: {error.get('Message', '')}"
    if code in THROTTLING_CODES or status == 429:
        return ThrottledError(message)
    if code in UNAVAILABLE_CODES or status >= 500:
        return ServiceUnavailableError(message)
    return ModelAccessError(message) if model else ToolFailedError(message)
