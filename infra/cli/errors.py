"""One error handler for the CLI: a one-line ``error: ...`` with a hint, and documented exit codes.

Exit codes: 0 success; 1 the run failed; 2 usage or bad input (files, scenarios, configuration
values); 3 AWS or configuration error (region, credentials, stack, permissions); 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_AWS = 3
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An error the CLI reports in one line.

    Args:
        message: what went wrong, naming the bad field or file.
        code: the exit code.
        hint: what to try, or None.
    """

    def __init__(self, message: str, code: int = EXIT_USAGE, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


def describe(exc: BaseException) -> CliError | None:
    """The one-line report of ``exc`` and its exit code, or None for an unexpected error."""
    from botocore import exceptions as boto

    from longstep.errors import LongstepError
    from longstep.settings import SettingsError
    from longstep_kit.config import ConfigError

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return CliError("interrupted", EXIT_INTERRUPTED)
    if isinstance(exc, boto.NoRegionError):
        return CliError("no AWS region configured", EXIT_AWS, "pass --region or set AWS_REGION")
    if isinstance(exc, (boto.NoCredentialsError, boto.PartialCredentialsError)):
        return CliError("no AWS credentials found", EXIT_AWS, "pass --profile, set AWS_PROFILE, or run `aws configure`")
    if isinstance(exc, boto.ProfileNotFound):
        return CliError(str(exc), EXIT_AWS, "list profiles with `aws configure list-profiles`")
    if isinstance(exc, boto.EndpointConnectionError):
        return CliError(
            f"cannot reach {exc.kwargs.get('endpoint_url', 'the endpoint')}", EXIT_AWS, "is `longstep local serve` running? check --endpoint-url"
        )
    if isinstance(exc, boto.ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Error")
        hint = "check the credentials' permissions" if "AccessDenied" in code or "Unauthorized" in code else None
        return CliError(f"{exc.operation_name}: {code}: {err.get('Message', '')}", EXIT_AWS, hint)
    if isinstance(exc, (ConfigError, SettingsError)):
        return CliError(str(exc), EXIT_AWS, "fix cdk.json's longstep context")
    if isinstance(exc, LongstepError):
        return CliError(str(exc), EXIT_USAGE)
    from longstep_kit.bundling import BundlingError

    if isinstance(exc, BundlingError):  # the project's code or the layer's requirements: the user's to fix
        return CliError(str(exc), EXIT_USAGE)
    from longstep_kit.project import ProjectNotFoundError

    if isinstance(exc, ProjectNotFoundError):  # a command that needs a project, run outside one: usage
        return CliError(str(exc), EXIT_USAGE)
    if isinstance(exc, UnicodeDecodeError):
        return CliError(f"a file is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})", EXIT_USAGE)
    if isinstance(exc, FileNotFoundError):
        return CliError(f"{exc.filename}: no such file", EXIT_USAGE)
    if isinstance(exc, IsADirectoryError):
        return CliError(f"{exc.filename}: is a directory, expected a file", EXIT_USAGE)
    if isinstance(exc, PermissionError):
        return CliError(f"{exc.filename}: permission denied", EXIT_USAGE)
    if isinstance(exc, json.JSONDecodeError):
        return CliError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", EXIT_USAGE)
    return None


def report(exc: BaseException, debug: bool = False) -> int:
    """Print ``exc`` as one line (a traceback only with ``--debug``) and return its exit code."""
    known = describe(exc)
    if known is None:
        if debug:
            raise exc
        print(f"error: unexpected {type(exc).__name__}: {exc} (run again with --debug for the traceback)", file=sys.stderr)
        return EXIT_RUN_FAILED
    line = f"error: {known}"
    if known.hint:
        line += f" (hint: {known.hint})"
    print(line, file=sys.stderr)
    return known.code


def emit(args: Any, data: Any) -> None:
    """Print ``data`` as JSON (``--output json`` and the commands' own ``--json``)."""
    print(json.dumps(data, indent=2, default=str))
