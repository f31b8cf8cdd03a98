"""The error family: Step Functions names and the generated Retry list."""

import gc
import json
import os
import subprocess
import sys

import pytest

from longstep import errors
from longstep.errors import (
    InvalidInputError,
    LongstepError,
    ModelAccessError,
    ModelError,
    NonDeterminismError,
    OutcomeUnknownError,
    PermanentError,
    RunConflictError,
    ScriptExhaustedError,
    ServiceUnavailableError,
    StepInProgressError,
    ThrottledError,
    ToolArgumentsError,
    ToolFailedError,
    ToolInputError,
    TransientError,
    UnknownAgentError,
    UnknownToolError,
    lock_wait_error_names,
    permanent_error_names,
    retryable_error_names,
)

TRANSIENT = [ThrottledError, ServiceUnavailableError]
PERMANENT = [
    InvalidInputError,
    UnknownAgentError,
    RunConflictError,
    NonDeterminismError,
    ScriptExhaustedError,
    ModelAccessError,
    ToolFailedError,
    OutcomeUnknownError,
]
MODEL_ERRORS = [UnknownToolError, ToolArgumentsError, ToolInputError]


def _all_subclasses(base):
    seen, pending = set(), [base]
    while pending:
        cls = pending.pop()
        if cls not in seen:
            seen.add(cls)
            pending.extend(cls.__subclasses__())
    return seen


@pytest.mark.parametrize("cls", TRANSIENT)
def test_known_transient_errors_are_retryable(cls):
    assert issubclass(cls, TransientError)
    assert cls.__name__ in retryable_error_names()


def test_every_transient_subclass_is_retried_by_one_of_the_two_retriers():
    names = set(retryable_error_names()) | set(lock_wait_error_names())
    missing = [cls.__name__ for cls in _all_subclasses(TransientError) if cls.__name__ not in names]
    assert missing == []


def test_lock_waits_have_their_own_retrier():
    assert lock_wait_error_names() == ["StepInProgressError"]
    assert issubclass(StepInProgressError, TransientError)
    assert not set(lock_wait_error_names()) & set(retryable_error_names())


def test_a_subclass_defined_elsewhere_does_not_change_the_lists():
    # The lists are generated from longstep.errors alone: what else is imported never matters.
    before = (retryable_error_names(), permanent_error_names(), lock_wait_error_names())

    class BrandNewTransientError(TransientError):
        pass

    class BrandNewPermanentError(PermanentError):
        pass

    try:
        assert (retryable_error_names(), permanent_error_names(), lock_wait_error_names()) == before
        assert "BrandNewTransientError" not in retryable_error_names()
    finally:
        del BrandNewTransientError, BrandNewPermanentError
        gc.collect()


def test_the_lists_are_the_same_in_a_process_that_imports_only_the_errors_module():
    code = (
        "import json, sys; from longstep import errors; "
        # (the package's __init__ brings its lazy-export helper, longstep.exports, and nothing else)
        "assert sorted(m for m in sys.modules if m.startswith('longstep.')) == ['longstep.errors', 'longstep.exports'], sorted(sys.modules); "
        "print(json.dumps([errors.retryable_error_names(), errors.permanent_error_names(), errors.lock_wait_error_names()]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    # This process has imported the whole runtime and the kit by now (the test suite's imports).
    import longstep.humans.api, longstep.tasks.call_tool, longstep_kit.ops.views.inspector  # noqa: E401, F401

    assert json.loads(done.stdout) == [retryable_error_names(), permanent_error_names(), lock_wait_error_names()]


@pytest.mark.parametrize(
    "name",
    [
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
        "Lambda.ClientExecutionTimeoutException",
        "Sandbox.Timedout",
    ],
)
def test_lambda_service_errors_are_retryable(name):
    assert name in retryable_error_names()


def test_retry_list_includes_every_declared_lambda_service_error():
    assert set(errors.LAMBDA_SERVICE_ERRORS) <= set(retryable_error_names())


@pytest.mark.parametrize("cls", PERMANENT)
def test_permanent_errors_are_never_retried(cls):
    assert issubclass(cls, PermanentError)
    assert cls.__name__ not in retryable_error_names()
    assert cls.__name__ in permanent_error_names()


def test_retryable_and_permanent_lists_are_disjoint():
    assert set(retryable_error_names()).isdisjoint(permanent_error_names())
    assert "PermanentError" not in retryable_error_names()


@pytest.mark.parametrize("cls", MODEL_ERRORS)
def test_model_errors_are_neither_retried_nor_permanent(cls):
    assert issubclass(cls, ModelError)
    assert not issubclass(cls, (TransientError, PermanentError))
    assert cls.__name__ not in retryable_error_names()
    assert cls.__name__ not in permanent_error_names()


@pytest.mark.parametrize("fn", [retryable_error_names, permanent_error_names])
def test_name_lists_are_sorted_and_unique(fn):
    names = fn()
    assert names == sorted(names)
    assert len(names) == len(set(names))
    assert all(isinstance(n, str) and n for n in names)


ERRORS_MODULE_CLASSES = sorted(
    (obj for obj in vars(errors).values() if isinstance(obj, type) and issubclass(obj, LongstepError)),
    key=lambda c: c.__name__,
)


# Errors that carry more than a message.
ARGUMENTS = {
    errors.BadRequestError: ("field", "boom"),
    errors.ApprovalAlreadyDecidedError: ("boom", {"decision": "approve"}, "approved"),
    errors.AlreadyDecidedError: ("boom", {"action": "retry"}),
    errors.SignalRefusedError: ("run_id", "boom", 404),
    errors.ArgumentsRefusedError: ({"to": "boom"},),
    errors.ApprovalStaleError: ("boom", "digest"),
}


def test_every_longstep_error_of_the_runtime_is_defined_in_the_errors_module():
    import longstep.humans.api, longstep.store, longstep.tasks.call_tool  # noqa: E401, F401

    elsewhere = [
        f"{cls.__module__}.{cls.__name__}"
        for cls in _all_subclasses(LongstepError)
        if cls.__module__.startswith("longstep.") and cls.__module__ != "longstep.errors"
    ]
    assert elsewhere == []


@pytest.mark.parametrize("cls", ERRORS_MODULE_CLASSES, ids=lambda c: c.__name__)
def test_error_name_is_what_a_python_lambda_reports(cls):
    # A Python Lambda reports an uncaught exception under type(exc).__name__.
    try:
        raise cls(*ARGUMENTS.get(cls, ("boom",)))
    except LongstepError as exc:
        reported = type(exc).__name__
    assert cls.error_name() == reported == cls.__name__


def test_error_name_is_per_class_not_inherited_value():
    assert ThrottledError.error_name() != TransientError.error_name()
    assert UnknownAgentError.error_name() == "UnknownAgentError"
    assert issubclass(UnknownAgentError, InvalidInputError)
