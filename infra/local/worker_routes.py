"""The served endpoint's side of the Lambda workers: their IAM questions, and a real kill mid-write.

Wrapped around moto's WSGI application when the stack runs its Lambdas in worker processes
(:mod:`longstep_kit.local.worker_pool`):

- ``POST /_longstep/worker/check`` (a control route: the serve's token) answers whether the role
  of the function a worker runs may make an AWS call, with the stack's enforcement;
- every other request signed with a busy worker's access key is watched: for each write
  (``PutItem``, ``UpdateItem``, ``PutObject``, ``SendTaskSuccess``, ...) the pool's ``on_write``
  decides whether that worker is to die, and then moto serves the request (the write takes
  effect), the worker's step claims are ended, and the worker is sent SIGKILL before the response
  leaves: what a sandbox lost between a write and its acknowledgement leaves behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any, Callable
from urllib.parse import parse_qs

from longstep.claims import ATTEMPT_ATTRIBUTE, LEASE_ATTRIBUTE, RESULT_ATTRIBUTES
from longstep_kit.local.iam import acting_as
from longstep_kit.local.worker import CHECK_ROUTE, unjsonable

_CREDENTIAL = re.compile(r"Credential=([^/\s,]+)/")
_ATTEMPT = re.compile(rb"[0-9a-f]{32}")  # a step claim's attempt id (``uuid4().hex``: longstep.steps)


def operation_of(environ: dict[str, Any]) -> str | None:
    """The API operation of a request: its ``X-Amz-Target``'s, or an S3 object write's."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return str(target).rpartition(".")[2]
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    if "x-id" in query:  # botocore names S3 operations in the query
        return query["x-id"][0]
    segments = [s for s in environ.get("PATH_INFO", "").split("/") if s]
    if environ.get("REQUEST_METHOD") == "PUT" and len(segments) >= 2 and not query and "HTTP_X_AMZ_COPY_SOURCE" not in environ:
        return "PutObject"
    return None


def _table_of(body: bytes) -> str:
    """A DynamoDB request's table (its JSON body's ``TableName``; a batch's tables), else empty."""
    try:
        request = json.loads(body)
    except ValueError:
        return ""
    names = (
        [request.get("TableName")]
        + list(request.get("RequestItems", {}))
        + [next(iter(item.values()), {}).get("TableName") for item in request.get("TransactItems", [])]
    )
    return " ".join(str(n) for n in names if n)


class WorkerRoutes:
    """WSGI middleware serving the workers (see the module's docstring).

    Args:
        app: moto's WSGI application.
        pool: the stack's worker pool.
        enforcement: the stack's :class:`~longstep_kit.local.fidelity.Enforcement` (None: off).
        client: the stack's boto3 client factory (ending a killed worker's claims, as the stack).

    Attributes:
        end_claims: end a killed worker's step claims at once (as a simulated crash does); off,
            its retries wait for the claims' leases to run out, as in AWS.
    """

    def __init__(self, app: Callable[..., Any], pool: Any, enforcement: Any, client: Callable[[str], Any]) -> None:
        self.app, self.pool, self.enforcement, self.client = app, pool, enforcement, client
        self.end_claims = True

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == CHECK_ROUTE:
            return self._check(environ, start_response)
        match = _CREDENTIAL.search(str(environ.get("HTTP_AUTHORIZATION", "")))
        worker = self.pool.busy_worker(match.group(1)) if match else None
        operation = operation_of(environ) if worker is not None else None
        if worker is None or operation is None or self.pool.on_write is None:
            return self.app(environ, start_response)
        where = environ.get("PATH_INFO", "")
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
            import io

            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            worker.writes.append(body)
            where = _table_of(body)
        if not self.pool.on_write(worker, operation, where):
            return self.app(environ, start_response)
        b"".join(self.app(environ, lambda *args, **kwargs: None))  # moto carries the write out
        if self.end_claims:
            self._end_claims(worker.writes)
        os.kill(worker.pid, signal.SIGKILL)  # no response reaches the worker: it is gone
        start_response("500 Internal Server Error", [("Content-Length", "0")])
        return [b""]

    def _check(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        question = unjsonable(json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)) or b"{}"))
        refused = None
        if self.enforcement is not None and self.enforcement.policies is not None:
            with acting_as(question.get("role")):
                refused = self.enforcement.refusal(question["service"], question["operation"], question.get("params") or {})
        answer = {"ok": True} if refused is None else {"ok": False, "code": refused[0], "status": refused[1], "message": refused[2]}
        data = json.dumps(answer).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def _end_claims(self, writes: list[bytes]) -> None:
        """End the step claims a killed worker wrote, as if their leases had run out.

        As with a simulated crash (``local/faults.py``), the local stack skips the wait to the
        claim's lease end (its invocation's timeout) that AWS's lock-wait retrier outlasts.
        """
        attempts = {m.decode() for body in writes for m in _ATTEMPT.findall(body)}
        tables = {name for body in writes for name in _table_of(body).split()}
        if not attempts:
            return
        dynamodb = self.client("dynamodb")
        with acting_as(None):
            for table in sorted(tables):
                keys = [k["AttributeName"] for k in dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]]
                for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
                    for item in page["Items"]:
                        attempt = item.get(ATTEMPT_ATTRIBUTE, {}).get("S")
                        if attempt not in attempts or any(name in item for name in RESULT_ATTRIBUTES):
                            continue
                        dynamodb.update_item(
                            TableName=table,
                            Key={k: item[k] for k in keys},
                            UpdateExpression="SET #l = :zero",
                            ConditionExpression="#a = :attempt",
                            ExpressionAttributeNames={"#l": LEASE_ATTRIBUTE, "#a": ATTEMPT_ATTRIBUTE},
                            ExpressionAttributeValues={":zero": {"N": "0"}, ":attempt": {"S": attempt}},
                        )
