"""DynamoDB's ``ClientRequestToken`` on ``TransactWriteItems``, which moto ignores.

AWS: "Providing a ClientRequestToken makes the call to TransactWriteItems idempotent, meaning that
multiple identical calls have the same effect as one single call. [...] A client request token is
valid for 10 minutes after the first request that uses it is completed. [...] If you submit a
request with the same client token but a change in other parameters within the 10-minute
idempotency window, DynamoDB returns an IdempotentParameterMismatch exception"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
botocore fills the token in itself (the parameter is an ``idempotencyToken`` in its model) once
per call, so an SDK retry of a transaction whose response was lost sends the same token: AWS
answers it with success and writes nothing again; moto ran it again, and its conditions, already
met by the first attempt, cancelled it. A caller that trusts the answer (the fleet's concurrency
slots) then acted on a failure that was a success.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

from longstep_kit.local.moto_patches.registry import fidelity, patch

# How long a token is remembered after its transaction completed (AWS's window).
TOKEN_WINDOW_SECONDS = 600


@fidelity("https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html")
def transactions_keep_request_tokens(now: Callable[[], float]) -> None:
    """A ``TransactWriteItems`` repeated with the token of one that succeeded within
    ``TOKEN_WINDOW_SECONDS`` (on ``now``: the local stack's clock) answers as the first did and
    writes nothing; with the same token and other items it is ``IdempotentParameterMismatchException``.

    Keeps identical: moto's validation, execution and answers of every transaction without a
    token, with a new one, or with the token of one that failed (AWS's page does not say what such
    a token does: it is not remembered, the call runs as moto runs it).
    """
    from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.transact_write_items
    completed: dict[tuple[str, str, str], tuple[str, float, Any]] = {}  # (account, region, token) -> (items, when, answer)
    guard = threading.Lock()

    class IdempotentParameterMismatch(DynamodbException):
        def __init__(self) -> None:
            message = "The request uses the same client token as a previous, but non-identical request."
            super().__init__(ERROR_TYPE_PREFIX + "IdempotentParameterMismatchException", message)

    def transact_write_items(handler: Any) -> Any:
        token = handler.body.get("ClientRequestToken")
        if not token:
            return original(handler)
        key = (handler.current_account, handler.region, str(token))
        items = json.dumps(handler.body.get("TransactItems"), sort_keys=True)
        with guard:
            known = completed.get(key)
            if known is not None and now() - known[1] > TOKEN_WINDOW_SECONDS:
                del completed[key]
                known = None
        if known is not None:
            if known[0] != items:
                raise IdempotentParameterMismatch()
            return known[2]
        answer = original(handler)  # raises when it is cancelled: nothing remembered
        with guard:
            completed[key] = (items, now(), answer)
        return answer

    patch(DynamoHandler, "transact_write_items", transact_write_items)
