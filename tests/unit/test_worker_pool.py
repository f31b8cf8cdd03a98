"""The pieces of the process-isolated Lambda that need no stack: Lambda's words for a runtime
process that ended, the operation of a worker's request, and the bytes of its IAM questions."""

from __future__ import annotations

import json
import signal

from longstep_kit.local.worker import jsonable, unjsonable
from longstep_kit.local.worker_pool import exit_error
from longstep_kit.local.worker_routes import operation_of


def test_a_worker_killed_or_exiting_is_reported_as_lambda_reports_its_runtime_process():
    assert exit_error(-signal.SIGKILL, "r-1") == {
        "errorType": "Runtime.ExitError",
        "errorMessage": "RequestId: r-1 Error: Runtime exited with error: signal: killed",
    }
    assert exit_error(1, "r-2")["errorMessage"] == "RequestId: r-2 Error: Runtime exited with error: exit status 1"
    assert exit_error(-signal.SIGTERM, "r-3")["errorMessage"].endswith("signal: terminated")


def test_the_operation_of_a_request():
    assert operation_of({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem"}) == "PutItem"
    assert operation_of({"HTTP_X_AMZ_TARGET": "AWSStepFunctions.SendTaskSuccess"}) == "SendTaskSuccess"
    assert operation_of({"REQUEST_METHOD": "PUT", "PATH_INFO": "/bucket/a/key", "QUERY_STRING": "x-id=PutObject"}) == "PutObject"
    assert operation_of({"REQUEST_METHOD": "PUT", "PATH_INFO": "/bucket/key", "QUERY_STRING": ""}) == "PutObject"
    assert operation_of({"REQUEST_METHOD": "PUT", "PATH_INFO": "/bucket/key", "QUERY_STRING": "tagging"}) is None
    assert operation_of({"REQUEST_METHOD": "GET", "PATH_INFO": "/bucket/key", "QUERY_STRING": ""}) is None


def test_bytes_in_an_iam_question_arrive_as_bytes():
    params = {"Bucket": "b", "Body": b"\x00\xffdata", "Nested": [{"Value": bytearray(b"x")}]}
    assert unjsonable(json.loads(json.dumps(params, default=jsonable))) == {"Bucket": "b", "Body": b"\x00\xffdata", "Nested": [{"Value": b"x"}]}
