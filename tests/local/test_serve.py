"""``longstep local serve`` from other shells: the stack is served in one process and driven from
separate ones, with the AWS CLI, boto3 (any SDK) and the ``longstep`` CLI against
``--endpoint-url``: list the state machines, start the triage run, see it park on its approvals,
approve them, and see it finish. Every wait is bounded."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
import sys
from pathlib import Path

import pytest

from longstep_kit.local.endpoint_guard import TOKEN_ENV, TOKEN_HEADER
from longstep_kit.local.serve import free_port
from tests.local.conftest import LONGSTEP, REPO_ROOT, start_served
from tests.local.conftest import as_from_a_terminal as _as_from_a_terminal
from tests.local.conftest import interrupt as _interrupt
from tests.local.conftest import serve_env as _env
from tests.local.conftest import until as _until


def _longstep(url: str, *argv: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = _env() if token is None else {**_env(), TOKEN_ENV: token}
    return subprocess.run([*LONGSTEP, *argv, "--endpoint-url", url], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)


TOKENS: dict[str, str] = {}  # endpoint -> the serve's control token (from its ready file)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    stack = start_served(tmp_path_factory.mktemp("serve"), run_id="served-1")
    TOKENS[stack.endpoint_url] = stack.token
    try:
        yield stack.endpoint_url, stack.start, stack.pages_url
    finally:
        # SIGTERM (kill, a process manager) ends the server as Ctrl-C does; the other test sends Ctrl-C.
        code, out = stack.stop(signal.SIGTERM)
        assert code == 0 and out.rstrip().endswith("stopped") and "Traceback" not in out, out[-3000:]
        # The served terminal printed each new request's decision link...
        assert "approval requested: run served-1 turn 5 call 0 send_email: http" in out, out[-3000:]
        # ...and each escalation, with its inbox link, the command that answers it, and (for a
        # model the local stack does not have) how to script one.
        assert "escalated: run served-plain turn 0 ModelTurn: NotImplementedError" in out, out[-3000:]
        assert f"answer it: {stack.pages_url}pages/inbox/" in out and "longstep resolve served-plain 0 --retry" in out, out[-3000:]
        assert "a run on the local stack needs a scripted model" in out, out[-3000:]


def _aws(url: str, *argv: str) -> subprocess.CompletedProcess:
    aws = Path(sys.executable).parent / "aws"  # the AWS CLI of the dev extra
    return subprocess.run([str(aws), *argv, "--endpoint-url", url, "--output", "json"], env=_env(), capture_output=True, text=True, timeout=120)


def test_the_aws_cli_lists_the_state_machine(served):
    url, _, _ = served
    listed = _aws(url, "stepfunctions", "list-state-machines")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["stateMachines"]) == 1


def test_an_sdk_in_another_process_sees_the_stack(served):
    url, _, _ = served
    import boto3

    sfn = boto3.client("stepfunctions", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    names = [m["name"] for m in sfn.list_state_machines()["stateMachines"]]
    assert names, "no state machine served"


def test_a_run_started_and_approved_from_other_shells_finishes(served):
    url, start, _ = served
    machine = json.loads(_aws(url, "stepfunctions", "list-state-machines").stdout)["stateMachines"][0]["stateMachineArn"]
    started = _aws(url, "stepfunctions", "start-execution", "--state-machine-arn", machine, "--name", "served-1", "--input", f"file://{start}")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["executionArn"].endswith(":served-1")

    def pending():
        listed = _longstep(url, "approvals", "--output", "json")
        assert listed.returncode == 0, listed.stderr
        return json.loads(listed.stdout)

    decided = 0
    while True:
        status = json.loads(_longstep(url, "status", "served-1", "--output", "json").stdout)
        if status["execution_status"] != "RUNNING":
            break
        requests = _until(
            lambda: pending()
            or json.loads(_longstep(url, "status", "served-1", "--output", "json").stdout)["execution_status"] != "RUNNING"
            and [{}],
            "an approval or the end",
        )
        for request in requests:
            if "approval_id" in request and decided == 0:  # the served pages show it (the CLI decides it)
                assert "send_email" in _page_of(url, served[2], request["approval_id"])
                # ...through the link `longstep approvals` prints: the served stack's pages, without --pages-url.
                linked = _longstep(url, "approvals", "--output", "json")
                (listed,) = [r for r in json.loads(linked.stdout) if r["approval_id"] == request["approval_id"]]
                assert listed["link"].startswith(served[2])
                with urllib.request.urlopen(listed["link"], timeout=60) as page:
                    assert page.status == 200 and "send_email" in page.read().decode()
            if "approval_id" in request:
                approved = _longstep(url, "approve", request["approval_id"], "--reason", "looks right")
                assert approved.returncode == 0, approved.stderr
                decided += 1
        assert decided <= 10
    assert (status["status"], status["execution_status"]) == ("succeeded", "SUCCEEDED"), status
    assert decided >= 1
    runs = json.loads(_longstep(url, "runs", "--output", "json").stdout)
    assert "served-1" in [r["run_id"] for r in runs]
    shown = _longstep(url, "show", "served-1")
    assert shown.returncode == 0 and "served-1" in shown.stdout


def test_a_plain_start_is_refused_at_the_door_and_a_bedrock_run_is_announced(served, tmp_path):
    url, _, _ = served
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"run_id": "served-plain", "goal": "Triage the checkout incident.", "agent": "triage"}))
    refused = _longstep(url, "start", "--input", str(plain))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "has no Bedrock" in refused.stderr and "longstep local serve --scenario" in refused.stderr, refused.stderr
    # Past the door (the AWS CLI), the run escalates at its first turn: the serve announces it (see `served`).
    machine = json.loads(_aws(url, "stepfunctions", "list-state-machines").stdout)["stateMachines"][0]["stateMachineArn"]
    started = _aws(url, "stepfunctions", "start-execution", "--state-machine-arn", machine, "--name", "served-plain", "--input", f"file://{plain}")
    assert started.returncode == 0, started.stderr

    def escalated():
        shown = json.loads(_longstep(url, "status", "served-plain", "--output", "json").stdout)
        return shown["status"] == "escalated" and shown

    shown = _until(escalated, "the Bedrock run to escalate")
    assert "NotImplementedError" in (shown["reason"] or ""), shown


def test_signals_from_another_shell(served):
    url, _, _ = served
    refused = _longstep(url, "signal", "nobody", "go")
    assert refused.returncode == 2 and refused.stderr.startswith("error: run_id: no run")
    buffered = _longstep(url, "signal", "nobody", "go", "--buffer")
    assert buffered.returncode == 0, buffered.stderr


def test_the_approval_pages_are_served_beside_the_stack(served):
    import urllib.error
    import urllib.request

    _, _, pages_url = served
    try:
        urllib.request.urlopen(f"{pages_url}pages/decide/v1.not.signed", timeout=60)
        raise AssertionError("a forged link opened a page")
    except urllib.error.HTTPError as exc:
        assert exc.code == 404 and exc.headers["Cache-Control"] == "no-store"
        assert "This link is not valid" in exc.read().decode()


def _page_of(url: str, pages_url: str, approval_id: str) -> str:
    """The decision page of a pending request, through a link signed, as the stack's notifiers sign
    them, with the served stack's key (read from its Secrets Manager by another process)."""
    import datetime as dt
    import urllib.request

    import boto3

    from longstep import links

    sm = boto3.client("secretsmanager", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    (secret,) = sm.list_secrets()["SecretList"]
    ring = links.keyring_from_secret(sm, secret["ARN"])
    expires = json.loads(_longstep(url, "approvals", "--output", "json").stdout)[0]["expires_at"]
    until = int(dt.datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp())
    link = links.decision_url(pages_url, ring.sign(links.Capability(links.Scope(approval=approval_id), until, "shell")))
    with urllib.request.urlopen(link, timeout=60) as response:
        assert response.status == 200 and response.headers["Cache-Control"] == "no-store"
        return response.read().decode()


def test_local_advance_skips_the_served_clock_and_fires_the_timers_due(served):
    # A one-day Wait on the served stack ends when another shell advances the clock a day.
    url, _, _ = served
    import boto3

    sfn = boto3.client("stepfunctions", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    definition = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 86_400, "End": True}}}
    arn = sfn.create_state_machine(name="advance-probe", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/x")[
        "stateMachineArn"
    ]
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    moved = _longstep(url, "local", "advance", "1d", "--output", "json", token=TOKENS[url])
    assert moved.returncode == 0, moved.stderr
    clock = json.loads(moved.stdout)
    assert clock["now"] - clock["before"] >= 86_400
    done = _until(
        lambda: sfn.describe_execution(executionArn=execution)["status"] != "RUNNING" and sfn.describe_execution(executionArn=execution),
        "the Wait to end",
    )
    assert done["status"] == "SUCCEEDED"
    text = _longstep(url, "local", "advance", "2h", token=TOKENS[url])
    assert text.returncode == 0 and text.stdout.startswith("advanced 2h (7200 s)"), text.stdout + text.stderr


def test_local_advance_against_an_endpoint_that_is_not_served_is_one_line(served):
    url, _, _ = served
    host, port = url.rsplit(":", 1)
    closed = f"{host}:9"  # the discard port: nothing listens
    refused = _longstep(closed, "local", "advance", "3d", "--timeout", "5", token="any")
    assert refused.returncode == 3 and refused.stderr.startswith("error: cannot reach") and refused.stderr.count("\n") == 1, refused.stderr
    bad = _longstep(url, "local", "advance", "3 days")
    assert bad.returncode == 2 and bad.stderr.startswith("error: DURATION:"), bad.stderr
    untold = _longstep(url, "local", "advance", "3d")
    assert untold.returncode == 2 and untold.stderr.startswith("error: --token:"), untold.stderr
    wrong = _longstep(url, "local", "advance", "3d", token="not-the-token")
    assert wrong.returncode == 3 and "refused" in wrong.stderr and wrong.stderr.count("\n") == 1, wrong.stderr


# -- the endpoint's door (local/endpoint_guard.py): what a web page in the developer's browser can do


def _raw(url: str, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One HTTP request with exactly these headers (Host included), as a browser could send it."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


SIGNED = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=00"
GET_SECRET = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "secretsmanager.ListSecrets", "Authorization": SIGNED}


def test_a_preflight_from_another_origin_is_refused_without_cors_headers(served):
    url, _, _ = served
    host = url.split("//", 1)[1]
    preflight = {
        "Host": host,
        "Origin": "http://attacker.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-amz-target",
    }
    status, headers, body = _raw(url, "OPTIONS", "/", preflight)
    assert status == 403 and b"Origin" in body  # moto's server answered 200 with Access-Control-Allow-Origin: *
    assert not [name for name in headers if name.startswith("access-control-")]
    # The request itself (a browser would not send it after the refusal; a form post would):
    status, headers, body = _raw(url, "POST", "/", {"Host": host, "Origin": "http://attacker.example", **GET_SECRET}, b"{}")
    assert status == 403 and b"SecretList" not in body and not [n for n in headers if n.startswith("access-control-")]


def test_a_rebound_host_and_a_cross_site_or_unsigned_request_are_refused(served):
    url, _, _ = served
    host = url.split("//", 1)[1]
    port = host.rsplit(":", 1)[1]
    # DNS rebinding: the attacker's name resolved to 127.0.0.1; the browser sends it as Host.
    status, _, body = _raw(url, "POST", "/", {"Host": f"rebound.attacker.example:{port}", **GET_SECRET}, b"{}")
    assert status == 403 and b"Host" in body and b"SecretList" not in body
    # <img src="http://127.0.0.1:PORT/?Action=..."> from another site: no Origin, but Sec-Fetch-Site.
    status, _, _ = _raw(url, "GET", "/?Action=ListQueues", {"Host": host, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
    assert status == 403
    # ...and from a browser that sends no fetch metadata: not signed, so not an AWS SDK's.
    status, _, body = _raw(url, "GET", "/?Action=ListQueues", {"Host": host})
    assert status == 403 and b"signed" in body
    # The same request from a shell (signed, Host 127.0.0.1:PORT, no Origin) is answered.
    status, _, body = _raw(url, "POST", "/", {"Host": host, **GET_SECRET}, b"{}")
    assert status == 200 and b"SecretList" in body


def test_the_control_routes_need_the_serves_token(served):
    url, _, _ = served
    host = url.split("//", 1)[1]
    clock = "/_longstep/clock"
    advance = b'{"seconds": 864000}'
    for headers in ({}, {TOKEN_HEADER: "guessed"}, {"Origin": "http://attacker.example", TOKEN_HEADER: TOKENS[url]}):
        status, _, _ = _raw(url, "POST", clock, {"Host": host, "Content-Type": "text/plain", **headers}, advance)
        assert status == 403, headers
    assert _raw(url, "GET", "/moto-api/data.json", {"Host": host})[0] == 403  # moto's dump of every backend
    status, _, body = _raw(url, "GET", clock, {"Host": host, TOKEN_HEADER: TOKENS[url]})
    assert status == 200 and json.loads(body)["now"] > 0


def test_the_pages_refuse_other_origins_and_hosts_but_open_from_a_link(served):
    _, _, pages_url = served
    host = pages_url.split("//", 1)[1].split("/", 1)[0]
    path = "/v1/pages/decide/v1.not.signed"
    form = {"Host": host, "Content-Type": "application/x-www-form-urlencoded"}
    status, _, body = _raw(pages_url, "POST", path, {**form, "Origin": "http://attacker.example"}, b"name=x&action=approve")
    assert status == 403 and b"Origin" in body
    status, _, _ = _raw(pages_url, "GET", path, {"Host": f"rebound.attacker.example:{host.rsplit(':', 1)[1]}"})
    assert status == 403
    # A link opened from a mail or chat: a cross-site top-level navigation reaches the page (404: forged).
    opened = {"Host": host, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    status, _, body = _raw(pages_url, "GET", path, opened)
    assert status == 404 and b"This link is not valid" in body


def test_a_local_run_with_external_approvals_then_served_for_inspection(tmp_path):
    # --approve external: the run waits for deciders in other shells (here, this test via the
    # longstep CLI); --serve: once the run is over and its report written, the stack stays up.
    port = free_port()
    ready, report = tmp_path / "ready.json", tmp_path / "report.json"
    proc = subprocess.Popen(
        [
            *LONGSTEP,
            "local",
            "run",
            "events/scenarios/triage.json",
            "--run-id",
            "outside",
            "--approve",
            "external",
            "--serve",
            "--port",
            str(port),
            "--ready-file",
            str(ready),
            "--report",
            str(report),
            "--quiet",
        ],
        cwd=REPO_ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        _until(lambda: ready.exists() or proc.poll() is not None, "the run's stack to be served", 180)
        assert proc.poll() is None, proc.stdout.read()
        url = json.loads(ready.read_text())["endpoint_url"]
        decided = set()
        while not report.exists():
            listed = _longstep(url, "approvals", "--run", "outside", "--output", "json")
            assert listed.returncode == 0, listed.stderr
            for request in json.loads(listed.stdout):
                if request["approval_id"] not in decided:
                    approved = _longstep(url, "approve", request["approval_id"], "--reason", "from another shell")
                    assert approved.returncode == 0, approved.stderr
                    decided.add(request["approval_id"])
            assert len(decided) <= 10 and proc.poll() is None
            _until(lambda: report.exists() or _pending(url, decided), "an approval or the report", 120)
        ran = json.loads(report.read_text())
        assert ran["status"] == "SUCCEEDED" and len(decided) >= 1
        approvers = [a["approver"] for a in ran["approvals"] if a["approver"]]
        assert approvers and not any(a.startswith("local-") for a in approvers), approvers  # nobody local decided
        # The run is over; the stack is still up for inspection.
        runs = _longstep(url, "runs", "--output", "json")
        assert runs.returncode == 0 and "outside" in [r["run_id"] for r in json.loads(runs.stdout)], runs.stderr
        assert proc.poll() is None
    finally:
        code = _interrupt(proc)
    out = proc.stdout.read()
    assert code == 0, out  # Ctrl-C ends the serving after a successful run: the run's exit code
    assert "SUCCEEDED: run outside" in out and "Traceback" not in out


def _pending(url: str, decided: set) -> bool:
    listed = _longstep(url, "approvals", "--run", "outside", "--output", "json")
    return listed.returncode == 0 and any(r["approval_id"] not in decided for r in json.loads(listed.stdout))
