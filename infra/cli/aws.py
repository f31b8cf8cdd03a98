"""The AWS side of the CLI: one session per command from ``--profile``, ``--region`` and
``--endpoint-url`` (explicit > environment > the SDK's configuration), clients made on first use,
and the deployed stack's outputs."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from typing import Any, Iterator

from longstep_kit.cli.errors import CliError, EXIT_AWS

ENV_ENDPOINT_URL = "AWS_ENDPOINT_URL"
# A local endpoint (``longstep local serve``) needs no account: these stand in when the caller has
# no Region or credentials configured (the server takes any signature's key).
LOCAL_REGION = "us-east-1"
LOCAL_CREDENTIALS = {"aws_access_key_id": "longstep-local", "aws_secret_access_key": "longstep-local"}


class Aws:
    """Clients for one CLI invocation.

    Args:
        region: the region (None: AWS_REGION, else the SDK's configuration: AWS_DEFAULT_REGION, the profile).
        profile: a named profile of the shared configuration files.
        endpoint_url: where every client sends its requests (a local server, e.g. `longstep local serve`);
            None: ``AWS_ENDPOINT_URL`` when set, else AWS.
    """

    def __init__(self, region: str | None = None, profile: str | None = None, endpoint_url: str | None = None) -> None:
        # AWS_REGION as the SDKs and Lambda set it; botocore itself reads AWS_DEFAULT_REGION and the profile.
        self.region = region or os.environ.get("AWS_REGION") or None
        self.profile = profile
        self.endpoint_url = check_endpoint_url(endpoint_url or os.environ.get(ENV_ENDPOINT_URL) or None)
        self._session: Any = None
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._told_retrying = False
        self._no_served_clock = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Aws":
        return cls(getattr(args, "region", None), getattr(args, "profile", None), getattr(args, "endpoint_url", None))

    def client(self, service: str) -> Any:
        """A client for ``service`` (made once per invocation)."""
        session = self.session()
        with self._lock:
            if service not in self._clients:
                made = session.client(service, endpoint_url=self.endpoint_url)
                total = (made.meta.config.retries or {}).get("total_max_attempts") or 3
                made.meta.events.register("needs-retry", lambda **kw: self._retry_notice(total=total, **kw))
                self._clients[service] = made
            return self._clients[service]

    def _retry_notice(self, total: int, attempts: int = 0, caught_exception: Any = None, **_: Any) -> None:
        """Say, once per command, that an endpoint does not answer and the SDK retries (seconds of silence otherwise).

        An observer: it returns None, so botocore's own retry handler decides whether and when.
        """
        from botocore.exceptions import ConnectionError as BotoConnectionError

        if isinstance(caught_exception, BotoConnectionError) and attempts < total and not self._told_retrying:
            self._told_retrying = True
            where = self.endpoint_url or "AWS"
            print(f"note: {where} does not answer; retrying (the SDK's retries, a few seconds)...", file=sys.stderr, flush=True)

    def _make_session(self, boto3: Any) -> Any:
        session = boto3.Session(profile_name=self.profile, region_name=self.region)
        if not self.is_local:
            return session
        # Against a local server, neither a Region nor credentials are needed: dummies stand in.
        region = session.region_name or LOCAL_REGION
        if session.get_credentials() is None:
            return boto3.Session(profile_name=self.profile, region_name=region, **LOCAL_CREDENTIALS)
        return boto3.Session(profile_name=self.profile, region_name=region)

    def session(self) -> Any:
        """The command's boto3 session (made once)."""
        import boto3

        with self._lock:
            if self._session is None:
                self._session = self._make_session(boto3)
            return self._session

    @contextlib.contextmanager
    def served_clock(self) -> Iterator[None]:
        """Inside, ``longstep.clock.now()`` is the local endpoint's clock when it serves one.

        ``longstep local serve`` runs its stack on a virtual clock (``longstep local advance``
        skips it ahead): the records, the executions' dates and their histories all carry that
        time, so the command's "now" (a run's age, a link's expiry, an event's time) must be it
        too. Against AWS, or an endpoint with no clock route, nothing changes (this machine's
        clock). Each read asks the server: virtual time jumps.
        """
        if not (self.endpoint_url and self.is_local):
            yield
            return
        from longstep import clock

        with clock.use_source(self._served_now):
            yield

    def _served_now(self) -> float:
        """The served clock's now, or this machine's when the endpoint has none (or is gone)."""
        import urllib.error
        import urllib.request

        from longstep_kit.local.endpoint_guard import CLOCK_ROUTE, TOKEN_ENV, TOKEN_HEADER

        if self._no_served_clock:
            return time.time()
        url = str(self.endpoint_url).rstrip("/") + CLOCK_ROUTE
        headers = self._signed_headers(url)
        token = os.environ.get(TOKEN_ENV)
        if token:
            headers[TOKEN_HEADER] = token
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as answer:  # noqa: S310 - a local endpoint
                return float(json.loads(answer.read())["now"])
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            # Not a longstep serve (no clock route), an older one, or nothing answering: the
            # API calls of the command say so if it matters; time is this machine's.
            self._no_served_clock = True
            return time.time()

    def _signed_headers(self, url: str) -> dict[str, str]:
        """SigV4 headers for a GET of ``url`` (the endpoint's door answers a signed clock read)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        session = self.session()
        request = AWSRequest(method="GET", url=url)
        SigV4Auth(session.get_credentials().get_frozen_credentials(), "longstep", session.region_name or LOCAL_REGION).add_auth(request)
        return dict(request.headers.items())

    @property
    def is_local(self) -> bool:
        """The endpoint is this machine's (a local server)."""
        from urllib.parse import urlsplit

        from longstep_kit.local.endpoint_guard import is_loopback

        host = urlsplit(self.endpoint_url).hostname if self.endpoint_url else None
        return host is not None and (host == "localhost" or is_loopback(host))

    def stack_output(self, stack_name: str, key: str) -> str:
        """An output of the deployed stack (the state machine ARN, a table name...).

        Raises:
            CliError: the stack does not exist here, or has no such output.
        """
        outputs = self.stack_outputs(stack_name)
        if key not in outputs:
            raise CliError(f"stack {stack_name} has no output {key}", EXIT_AWS, "is it a Longstep stack of this version? (cdk deploy)")
        return outputs[key]

    def stack_outputs(self, stack_name: str) -> dict[str, str]:
        from botocore.exceptions import ClientError

        try:
            stack = self.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
        except ClientError as exc:
            if "does not exist" in str(exc):
                where = self.endpoint_url or self.client("cloudformation").meta.region_name
                raise CliError(f"stack {stack_name} not found in {where}", EXIT_AWS, "pass --stack NAME, --region or --endpoint-url") from None
            raise
        return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def check_endpoint_url(url: str | None) -> str | None:
    """``url`` if it is an http(s) URL with a host.

    Raises:
        CliError: it is not (exit 2: a usage error, not an unreachable endpoint).
    """
    if url is None:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise CliError(f"--endpoint-url {url!r}: not a URL ({exc})", hint="e.g. http://127.0.0.1:4566") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--endpoint-url {url!r}: not an http(s) URL with a host", hint="e.g. http://127.0.0.1:4566")
    return url


def add_aws_options(parser: argparse.ArgumentParser) -> None:
    """``--region``, ``--profile`` and ``--endpoint-url``, as the AWS CLI has them."""
    group = parser.add_argument_group("AWS")
    group.add_argument("--region", help="AWS region, e.g. eu-west-1 (default: AWS_REGION or the profile's)")
    group.add_argument("--profile", help="named profile of ~/.aws/config (default: AWS_PROFILE or default)")
    group.add_argument(
        "--endpoint-url",
        help="send every request here, e.g. http://127.0.0.1:4566 for a local server (default: AWS_ENDPOINT_URL or AWS)",
    )
