"""``longstep smoke``'s runs on a deployed stack: each shipped scenario driven through the stack's
own doors, and its report built the way a local run's is.

The run starts on the alias ``live`` (``Steering.start``); its approvals are decided on the
approval pages, through a link signed with the stack's key (what a person opening the mailed link
does); its signals go on the stack's signal bus (EventBridge ``PutEvents``); one run is crashed
(its execution stopped mid-run) and resumed, so that it replays its checkpoints; one is paused and
resumed. The report holds what the local suite checks: the status, the transcript's hash and the
duplicate effects counted from the agent's ledgers.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterator

from longstep import keys, steering
from longstep.humans import signals
from longstep.humans.requests import pending_approvals
from longstep.messages import transcript_sha256
from longstep.store import CheckpointStore
from longstep.transcript import transcript
from longstep_kit.local.scenario import Scenario

POLL_SECONDS = 0.5
SIGNAL_SOURCE, SIGNAL_DETAIL_TYPE = "longstep.signal", "Longstep Signal"  # the signal rule's pattern
IDLE_SECONDS = 1.5  # nothing to answer for this long: a served stack's clock is skipped ahead
SKIP_SECONDS = 86_400.0
MAX_SKIPS = 12  # a 7-day approval timeout takes 7


class SmokeError(RuntimeError):
    """A smoke run could not go on (the message says where and why)."""


class _NoCode:
    """A deployed stack's functions run their own code: none of it is on this machine's disk."""

    code_dirs: dict[str, Any] = {}


@dataclass
class DeployedStack:
    """A stack reached through the caller's session: what the local stack's helpers need of one.

    Args:
        aws: the command's clients (``longstep_kit.cli.aws.Aws``).
        name: the stack's name.
        outputs: its CloudFormation outputs.
        clock_token: the ``local serve`` control token (None: time passes only by itself).
        pages_url: where the approval pages are (the ``ApprovalApiUrl`` on AWS).
    """

    aws: Any
    name: str
    outputs: dict[str, str]
    clock_token: str | None = None
    pages_url: str | None = None
    dispatcher: Any = field(default_factory=_NoCode)

    def client(self, service: str) -> Any:
        return self.aws.client(service)

    @property
    def store(self) -> CheckpointStore:
        return CheckpointStore(self.outputs["CheckpointTableName"], self.client("dynamodb"))

    @contextlib.contextmanager
    def agent_code(self) -> Iterator[None]:
        """The agents' own code (world loaders, ledgers) run here on this stack's tables."""
        from longstep import clients

        with clients.made_by(self.client):
            yield


@dataclass
class Plan:
    """What a smoke run does beyond the scenario: crash after ``crash_after`` steps, pause at turn ``pause_at``."""

    crash_after: int | None = None
    pause_at: int | None = None


@dataclass
class _Progress:
    started: bool = False
    crashed: bool = False
    paused: bool = False
    sent: set[int] = field(default_factory=set)
    steps: int = -1
    changed: float = field(default_factory=time.monotonic)
    skips: int = 0
    notes: list[str] = field(default_factory=list)


def run_on_stack(stack: DeployedStack, scenario: Scenario, run_id: str, plan: Plan, timeout_seconds: float, emit: Any = None) -> dict[str, Any]:
    """Run ``scenario`` on ``stack`` as ``run_id`` to its end and return its report.

    Raises:
        SmokeError: it did not end within ``timeout_seconds``.
    """
    from longstep_kit.local.runner import start_input
    from longstep_kit.local.world import check_and_seed
    from longstep_kit.ops.steer import Steering

    say = emit or (lambda line: None)
    with stack.agent_code():
        check_and_seed(stack, scenario, scenario.name)  # type: ignore[arg-type]
    payload = start_input(stack, scenario, run_id)  # type: ignore[arg-type]
    sfn, store = stack.client("stepfunctions"), stack.store
    steer = Steering(store, sfn, stack.outputs["StateMachineArn"], None, who="longstep-smoke")
    steer.start(payload)
    progress = _Progress(started=True)
    for index, sig in enumerate(scenario.signals):
        if sig.at == "start":
            _put_signal(stack, run_id, sig.event, sig.payload, buffer=True)  # kept until a wait takes it, as a local run's
            progress.sent.add(index)
            say(f"  {scenario.name}: signal {sig.event} on the bus (before any wait)")
    deadline = time.monotonic() + timeout_seconds
    while True:
        execution = _latest(stack, run_id)
        status = execution["status"]
        if status != "RUNNING":
            if status == "ABORTED" and progress.crashed and progress.notes[-1:] == ["crashed"]:
                stack_arn = stack.outputs["StateMachineArn"]
                from longstep_kit.ops import runs

                runs.resume(sfn, stack_arn, run_id)
                progress.notes.append("resumed")
                say(f"  {scenario.name}: resumed after the crash (the new execution replays the checkpoints)")
                continue
            if status == "SUCCEEDED" and json.loads(sfn.describe_execution(executionArn=execution["executionArn"]).get("output") or "{}").get(
                "continued_as"
            ):
                time.sleep(POLL_SECONDS)  # continue-as-new: the next generation is starting
                continue
            break
        acted = _step(stack, scenario, run_id, plan, progress, execution, say)
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=execution["executionArn"], error="SmokeTimeout", cause="longstep smoke's time limit")
            raise SmokeError(f"{scenario.name}: run {run_id} still RUNNING after {timeout_seconds:.0f} s")
        if not acted:
            _maybe_skip_time(stack, progress, say, scenario.name)
            time.sleep(POLL_SECONDS)
    return build_report(stack, run_id, progress)


def _latest(stack: DeployedStack, run_id: str) -> dict[str, Any]:
    from longstep_kit.ops import runs

    return runs.latest_execution(stack.client("stepfunctions"), stack.outputs["StateMachineArn"], run_id)


def _step(stack: DeployedStack, scenario: Scenario, run_id: str, plan: Plan, progress: _Progress, execution: dict[str, Any], say: Any) -> bool:
    """One look at the running run: answer, signal, crash or pause as due. True when something was done."""
    store, acted = stack.store, False
    if progress.notes[-1:] == ["crashed"]:
        return False  # the stopped execution is winding down: the next look resumes the run
    steps = store.steps(run_id)
    if len(steps) != progress.steps:
        progress.steps, progress.changed = len(steps), time.monotonic()
    pending = _pending(stack, run_id)
    if plan.pause_at is not None and not progress.paused and sum(1 for s in steps if s.kind == "model") >= plan.pause_at:
        # Before answering what the run is parked on: a run that has no more waits may end before
        # a look between two polls, and the pause is then asked of a run that has ended.
        acted |= _pause_and_resume(stack, run_id, progress, say, scenario.name)
    for request in pending:
        acted |= _decide(stack, scenario, run_id, request, say)
    acted |= _escalations(stack, run_id, say)
    for index, sig in enumerate(scenario.signals):
        if index in progress.sent or sig.at != "waiting":
            continue
        if (store.get(run_id, signals.signal_key(sig.event)) or {}).get("status") == signals.WAITING:
            _put_signal(stack, run_id, sig.event, sig.payload)
            progress.sent.add(index)
            say(f"  {scenario.name}: signal {sig.event} on the bus (its wait is parked)")
            acted = True
    if plan.crash_after is not None and not progress.crashed and len(steps) >= plan.crash_after:
        stack.client("stepfunctions").stop_execution(
            executionArn=execution["executionArn"], error="SmokeCrash", cause="longstep smoke: a crash mid-run"
        )
        progress.crashed = True
        progress.notes.append("crashed")
        say(f"  {scenario.name}: crashed the execution after {len(steps)} recorded steps")
        return True  # nothing more on this execution: the next look resumes the run
    if acted:
        progress.changed = time.monotonic()
    return acted


def _pending(stack: DeployedStack, run_id: str) -> list[dict[str, Any]]:
    from longstep.humans.table import ApprovalTable
    from longstep_kit.local.answers import _run_tree

    table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    return [r for tree_run in _run_tree(stack.store, run_id) for r in pending_approvals(table, tree_run)]


def _decide(stack: DeployedStack, scenario: Scenario, run_id: str, request: dict[str, Any], say: Any) -> bool:
    """Decide one request as the scenario says (a child run's: approved, as a local run does), on
    the approval page its signed link opens."""
    from longstep_kit.local.answers import scripted_call_key

    key = scripted_call_key(stack.store, scenario, request) if request["run_id"] == run_id else None
    scripted = scenario.approvals.get(key) if key else None
    if scripted is not None and scripted.decision == "timeout":
        return False  # nobody answers: its approval times out
    form = {"action": "approve", "name": "longstep-smoke"}
    if scripted is not None:
        form["action"] = scripted.decision
        if scripted.reason:
            form["reason"] = scripted.reason
        if scripted.input is not None:
            form["arguments"] = json.dumps(scripted.input)
    if not decide_on_page(stack, request, form):
        say(f"  {request['run_id']}: approval turn {request['turn']} call {request['call']}: closed meanwhile (its page says 410)")
        return False
    say(f"  {request['run_id']}: approval turn {request['turn']} call {request['call']} {request['tool']}: {form['action']} (on its page)")
    return True


def decide_on_page(stack: DeployedStack, request: dict[str, Any], form: dict[str, str]) -> bool:
    """Open the request's signed decision link and submit ``form`` with the page's CSRF fields;
    False when the page says the request is closed (410: decided, or expired by a stopped execution).

    Raises:
        SmokeError: the page is not there, or did not take the decision.
    """
    from longstep import links
    from longstep.humans.notifications import decision_link

    if not stack.pages_url:
        raise SmokeError("no approval pages to decide on (pass --pages-url)")
    ring = links.keyring_from_secret(stack.client("secretsmanager"), stack.outputs["LinkKeySecretArn"])
    link = decision_link(stack.pages_url, ring, request, subject="longstep smoke")
    page = _http(link)
    if page is None:
        return False
    fields = dict(re.findall(r'<input type="hidden" name="(nonce|csrf)" value="([^"]*)"', page))
    if set(fields) != {"nonce", "csrf"}:
        raise SmokeError(f"approval {request['approval_id']}: its page has no decision form ({link.split('/pages/')[0]})")
    import html

    body = urllib.parse.urlencode({**{k: html.unescape(v) for k, v in fields.items()}, **form})
    return _http(link, body.encode()) is not None


def _http(url: str, data: bytes | None = None) -> str | None:
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if data is not None else {}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - the stack's own pages
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 410:
            return None
        raise SmokeError(f"{url.split('/pages/')[0]}/pages/...: HTTP {exc.code}") from None
    except OSError as exc:
        raise SmokeError(f"cannot reach the approval pages at {url.split('/pages/')[0]}: {exc}") from None


def _escalations(stack: DeployedStack, run_id: str, say: Any) -> bool:
    """Escalations, answered as a local run's ``auto`` does: retried once, then aborted."""
    from longstep.humans.escalations import Resolution, pending_escalations, resolve
    from longstep_kit.local.answers import _run_tree

    acted = False
    for tree_run in _run_tree(stack.store, run_id):
        for escalation in pending_escalations(stack.store, tree_run):
            retry = escalation["error"] != "OutcomeUnknownError" and escalation["times"] == 1
            resolution = Resolution(action="retry" if retry else "abort", resolver="longstep-smoke")
            resolve(stack.store, stack.client("stepfunctions"), tree_run, escalation["turn"], escalation["call"], resolution)
            say(f"  {tree_run}: escalation turn {escalation['turn']} {escalation['error']}: {resolution.action}")
            acted = True
    return acted


def _put_signal(stack: DeployedStack, run_id: str, event: str, payload: dict[str, Any], buffer: bool = False) -> None:
    """Put the signal on the stack's bus (its rule's target, the approval API's signal handler, delivers it).

    Raises:
        SmokeError: the bus refused it (the caller is not a signal principal, for one).
    """
    detail = {"run_id": run_id, "event": event, "payload": payload, **({"buffer": True} if buffer else {})}
    entry = {"EventBusName": stack.outputs["SignalBusName"], "Source": SIGNAL_SOURCE, "DetailType": SIGNAL_DETAIL_TYPE, "Detail": json.dumps(detail)}
    put = stack.client("events").put_events(Entries=[entry])
    if put.get("FailedEntryCount"):
        failed = put["Entries"][0]
        raise SmokeError(f"signal {event}: PutEvents refused it: {failed.get('ErrorCode')} {failed.get('ErrorMessage')}")


def _pause_and_resume(stack: DeployedStack, run_id: str, progress: _Progress, say: Any, name: str) -> bool:
    """Pause the run; once it is parked on its Pause (no compute), resume it."""
    from longstep_kit.ops.steer import Steering

    steer = Steering(stack.store, stack.client("stepfunctions"), stack.outputs["StateMachineArn"], None, who="longstep-smoke")
    run = stack.store.get(run_id, keys.RUN_RECORD) or {}
    if not run.get(steering.PAUSED):
        from longstep_kit.ops.steer import RunNotRunningError

        try:
            steer.pause(run_id)
        except RunNotRunningError:  # between executions (resumed, continued as new): the next look pauses it
            return False
        say(f"  {name}: pause requested")
        return True
    if run.get(steering.PAUSE_TOKEN):
        steer.resume(run_id)
        progress.paused = True
        progress.notes.append("paused")
        say(f"  {name}: parked on its pause; resumed")
        return True
    return False


def _maybe_skip_time(stack: DeployedStack, progress: _Progress, say: Any, name: str) -> None:
    """On a local server, skip its clock a day ahead when the run has sat idle (a timer, a timeout)."""
    if stack.clock_token is None or time.monotonic() - progress.changed < IDLE_SECONDS:
        return
    if progress.skips >= MAX_SKIPS:
        return
    from longstep_kit.local.serve import advance_served

    advance_served(str(stack.aws.endpoint_url), SKIP_SECONDS, stack.clock_token)
    progress.skips += 1
    progress.changed = time.monotonic()
    say(f"  {name}: idle; the served clock skipped a day ahead")


# A clock reading in a tool result (a timer's ``until``): a deployed stack's clock is not the
# local run's, so the comparison leaves them out; everything else in the transcript is compared.
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")


def transcript_hashes(store: CheckpointStore, run_id: str) -> tuple[str, str]:
    """The run's transcript hash, and the hash of the same transcript with its clock readings masked."""
    run = store.get(run_id, keys.RUN_RECORD)
    messages = transcript({"goal": run["goal"]}, store.steps(run_id)) if run else []
    masked = json.loads(_TIMESTAMP.sub("<time>", json.dumps(messages)))
    return transcript_sha256(messages), transcript_sha256(masked)


def build_report(stack: DeployedStack, run_id: str, progress: _Progress) -> dict[str, Any]:
    """The checked part of a local run's report (``local/report.py``), from the deployed stack."""
    from longstep_kit.local.report import effects

    sfn = stack.client("stepfunctions")
    last = sfn.describe_execution(executionArn=_latest(stack, run_id)["executionArn"])
    store = stack.store
    run = store.get(run_id, keys.RUN_RECORD)
    exact, clock_free = transcript_hashes(store, run_id)
    with stack.agent_code():
        counted = effects(stack, run_id, run["agent"] if run else None)  # type: ignore[arg-type]
    report = {
        "run_id": run_id,
        "status": last["status"],
        "output": json.loads(last.get("output") or "{}").get("output"),
        "transcript_sha256": exact,
        "transcript_clock_free_sha256": clock_free,
        "effects": counted,
        "crashed_and_resumed": "resumed" in progress.notes,
        "paused_and_resumed": progress.paused,
        "clock_skips": progress.skips,
    }
    if last["status"] != "SUCCEEDED":
        report["error"], report["cause"] = last.get("error"), (last.get("cause") or "")[:300]
    return report
