"""One local stack per test module: synthesized once per session, deployed into a fresh moto."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.world import agent_context

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = REPO_ROOT / "events" / "scenarios"
LONGSTEP = [sys.executable, "-m", "longstep_kit.cli"]


@pytest.fixture(scope="module")
def stack():
    with LocalStack() as local:
        yield local


@pytest.fixture(scope="session")
def triage():
    return load_scenario(SCENARIOS / "triage.json")


@pytest.fixture(scope="session")
def delegate():
    return load_scenario(SCENARIOS / "delegate.json")


@pytest.fixture(scope="session")
def release():
    from longstep_kit.local.workflow_run import load_workflow_scenario

    return load_workflow_scenario(SCENARIOS / "release.json")


def release_ledger(stack) -> Counter:
    """What the release workflow's steps did, by kind, from its ledger table (its effects' record)."""
    from longstep_kit.local.workflow_run import workflow_tables

    table = workflow_tables(stack, "release")["release_ledger"]
    return Counter(item["kind"]["S"] for item in stack.client("dynamodb").scan(TableName=table)["Items"])


def delegate_context(**settings: Any) -> dict[str, Any]:
    """A stack context serving the delegate scenario: the project's agents and the ones the
    scenario names (its ``agents``: the lead and research agents), with deployment ``settings``."""
    from longstep_kit.project import agent_catalog

    agents = load_scenario(SCENARIOS / "delegate.json").agents
    return {"longstep": {"agents": {**agent_catalog().references, **agents}, **settings}}


@contextlib.contextmanager
def holds_released(clock) -> Iterator[None]:
    """Release the holds a test took and left (it failed between its hold and its release): on a
    module's shared stack, a leaked hold stops time for every test after it."""
    before = clock.holding
    try:
        yield
    finally:
        while clock.holding > before:
            clock.release()


def sent_email_rows(stack, run_id: str) -> list[dict[str, str]]:
    """Every email the run sent (to, subject, body), read from the sample's outbox as its tools see it."""
    from agents import triage_world

    with agent_context(stack, "triage"):
        rows = triage_world.scan(triage_world.outbox())
    sent = [{field: r[field]["S"] for field in ("to", "subject", "body")} for r in rows if r["run_id"]["S"] == run_id]
    return sorted(sent, key=lambda row: (row["to"], row["subject"]))


def sent_emails(stack, run_id: str) -> list[tuple[str, str]]:
    """(to, subject) of every email the run sent."""
    return [(row["to"], row["subject"]) for row in sent_email_rows(stack, run_id)]


class Background:
    """``run_scenario`` in a thread, while the test plays the humans (``approve="external"``)."""

    def __init__(self, stack, scenario: Any, options: RunOptions) -> None:
        self.report: dict[str, Any] | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.report = run_scenario(stack, scenario, options)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the run did not finish"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


# -- a served stack (``longstep local serve``) in a process of its own ----------------------------


def serve_env() -> dict[str, str]:
    """The environment of a served process and of the shells that drive it: test credentials only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "2",
            # A process that hangs on Ctrl-C is stopped with SIGABRT: faulthandler prints every thread.
            "PYTHONFAULTHANDLER": "1",
        }
    )
    return env


def as_from_a_terminal() -> None:
    """In the served process, before it starts: Ctrl-C's default action, as a terminal gives it.

    A process inherits SIGINT ignored when its parent ran in the background of a non-interactive
    shell (``cmd &``), and Python then installs no KeyboardInterrupt handler: the SIGINT a test
    sends would be lost, whatever the server does. (Found when a background suite run failed.)
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(proc: subprocess.Popen, signum: int = signal.SIGINT) -> int:
    """Ctrl-C (or ``signum``) the served process and return its exit code; if it has not exited after
    30 s, abort it and fail with the stacks of its threads (faulthandler's dump) and what it printed."""
    proc.send_signal(signum)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        raise AssertionError(f"the served process did not exit on Ctrl-C within 30 s; its threads:\n{out[-20000:]}") from None


def terminate(proc: subprocess.Popen) -> None:
    """SIGTERM a served process and wait for it (30 s); killed if it is still there."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def until(check, what: str, seconds: float = 90.0):
    """``check()``'s first truthy answer within ``seconds``, polled every 0.3 s (a check may start a
    CLI process)."""
    from longstep_kit.testing.wait import wait_until

    return wait_until(what, check, seconds, first_poll=0.3, max_poll=0.3)


@dataclass
class Served:
    """A ``longstep local serve`` process, ready: its endpoint, control token, pages and the start
    input it wrote for ``run_id``."""

    proc: subprocess.Popen
    endpoint_url: str
    token: str
    pages_url: str
    start: Path
    run_id: str

    def client(self, service: str) -> Any:
        """A boto3 client of the served endpoint (over HTTP, as any other process's SDK)."""
        import boto3

        return boto3.client(
            service, endpoint_url=self.endpoint_url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    def outputs(self) -> dict[str, str]:
        """The served stack's outputs (table names, the state machine), as the CLI reads them."""
        (stack,) = self.client("cloudformation").describe_stacks(StackName="Longstep")["Stacks"]
        return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        """End the serve (SIGTERM, as a process manager does); its exit code and what it printed."""
        code = interrupt(self.proc, signum)
        out = self.proc.stdout.read() if self.proc.stdout else ""
        if self.proc.stdout:
            self.proc.stdout.close()
        return code, out


def start_served(
    tmp: Path,
    *,
    port: int | None = None,
    scenario: str = "events/scenarios/triage.json",
    run_id: str = "served-1",
    project: Path = REPO_ROOT,
) -> Served:
    """Start ``longstep local serve`` in ``project`` for ``scenario`` (its start input for ``run_id``
    written beside the ready file in ``tmp``) and wait until it is ready; a serve that does not come
    up is killed."""
    from longstep_kit.local.serve import free_port

    ready, start = tmp / f"ready-{run_id}.json", tmp / f"start-{run_id}.json"
    ready.unlink(missing_ok=True)  # an earlier serve's, on this port or another: not this one's
    argv = [*LONGSTEP, "local", "serve", "--port", str(port or free_port()), "--pages-port", str(free_port())]
    argv += ["--scenario", scenario, "--run-id", run_id, "--input-out", str(start), "--ready-file", str(ready)]
    proc = subprocess.Popen(
        argv, cwd=project, env=serve_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=as_from_a_terminal
    )
    try:
        until(lambda: ready.exists() or proc.poll() is not None, "the server to be ready", 180)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        info = json.loads(ready.read_text())
    except BaseException:
        proc.kill()
        proc.wait(timeout=30)
        raise
    return Served(proc, info["endpoint_url"], info["token"], info["pages_url"], start, run_id)


@pytest.fixture
def serve(tmp_path):
    """Start served stacks (``serve(port=..., scenario=..., run_id=...)``); any still running at the
    end of the test is ended."""
    started: list[Served] = []

    def start(**kwargs: Any) -> Served:
        started.append(start_served(tmp_path, **kwargs))
        return started[-1]

    yield start
    for served in started:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait(timeout=30)
