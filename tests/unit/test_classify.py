"""classify_client_error on hand-built botocore ClientErrors."""

import pytest
from botocore.exceptions import ClientError

from longstep.classify import THROTTLING_CODES, UNAVAILABLE_CODES, classify_client_error
from longstep.errors import (
    ModelAccessError,
    PermanentError,
    ServiceUnavailableError,
    ThrottledError,
    ToolFailedError,
    TransientError,
    retryable_error_names,
)


def client_error(code="", status=400, message="msg", operation="Converse"):
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, operation)


@pytest.mark.parametrize("model", [True, False])
@pytest.mark.parametrize("code", ["ThrottlingException", "TooManyRequestsException", "ProvisionedThroughputExceededException", "SlowDown"])
def test_throttling_codes_are_throttled(code, model):
    err = classify_client_error(client_error(code, 400), model=model)
    assert type(err) is ThrottledError


@pytest.mark.parametrize("model", [True, False])
def test_http_429_is_throttled_whatever_the_code(model):
    assert type(classify_client_error(client_error("SomethingNew", 429), model=model)) is ThrottledError


@pytest.mark.parametrize("code", ["InternalServerException", "ServiceUnavailableException", "ModelTimeoutException", "InternalFailure"])
def test_unavailable_codes_are_service_unavailable(code):
    assert type(classify_client_error(client_error(code, 400), model=True)) is ServiceUnavailableError


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_service_unavailable_whatever_the_code(status):
    assert type(classify_client_error(client_error("Mystery", status), model=False)) is ServiceUnavailableError


@pytest.mark.parametrize("code, status", [("AccessDeniedException", 403), ("ValidationException", 400), ("ResourceNotFoundException", 404)])
def test_other_errors_are_permanent_and_depend_on_the_caller(code, status):
    assert type(classify_client_error(client_error(code, status), model=True)) is ModelAccessError
    assert type(classify_client_error(client_error(code, status), model=False)) is ToolFailedError


def test_every_code_in_the_tables_maps_to_a_transient_error():
    for code in THROTTLING_CODES | UNAVAILABLE_CODES:
        err = classify_client_error(client_error(code, 400), model=True)
        assert isinstance(err, TransientError), code
        assert err.error_name() in retryable_error_names()


def test_permanent_results_are_not_retried():
    err = classify_client_error(client_error("AccessDeniedException", 403), model=True)
    assert isinstance(err, PermanentError)
    assert err.error_name() not in retryable_error_names()


def test_message_carries_code_and_service_message():
    err = classify_client_error(client_error("AccessDeniedException", 403, "you shall not pass"), model=True)
    assert "AccessDeniedException" in str(err)
    assert "you shall not pass" in str(err)


def test_error_is_returned_not_raised():
    err = classify_client_error(client_error("ThrottlingException", 429), model=True)
    assert isinstance(err, Exception)


def test_response_without_error_or_metadata_is_permanent():
    bare = ClientError({}, "Converse")
    assert type(classify_client_error(bare, model=True)) is ModelAccessError
    assert type(classify_client_error(bare, model=False)) is ToolFailedError
