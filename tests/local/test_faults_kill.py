"""A real SIGKILL of ``longstep local serve`` while a run is in flight: what survives, precisely.

The served stack keeps every table, bucket and execution in the server process's memory (moto),
and by default its Lambda invocations are threads of that process: a SIGKILL takes all of it
(docs/durability.md, "A killed process"; a worker process killed alone, with the Lambdas isolated:
test_faults_kill_worker.py). What can be checked is
that nothing is left behind or open: the port is free at once, a client is told in one line that
nothing answers, and a new serve on the same port starts clean (no run of the killed one), able to
run the scenario to its approvals again.
"""

from __future__ import annotations

import json
import signal
import socket

from longstep_kit.local.serve import free_port
from tests.local.conftest import Served

from .test_serve import _longstep, _until


def _serve(serve, port: int, run_id: str) -> Served:
    """A served triage stack on ``port`` with ``run_id`` started on it."""
    served = serve(port=port, run_id=run_id)
    sfn = served.client("stepfunctions")
    machine = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]
    sfn.start_execution(stateMachineArn=machine, name=run_id, input=served.start.read_text())
    return served


def _pending(url: str) -> list:
    out = _longstep(url, "approvals", "--output", "json")
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else []


def test_a_killed_serve_leaves_nothing_open_and_a_new_one_starts_clean(serve):
    port = free_port()
    first = _serve(serve, port, "killed-1")
    url, token, proc = first.endpoint_url, first.token, first.proc
    try:
        _until(lambda: _pending(url), "the run to park on its first approval", 120)
    finally:
        proc.send_signal(signal.SIGKILL)  # no handler runs: not Ctrl-C, not SIGTERM (and none is left behind)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    proc.stdout.close()

    with socket.socket() as probe:  # the port is free at once (the server set SO_REUSEADDR)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    gone = _longstep(url, "status", "killed-1", "--output", "json")
    assert gone.returncode != 0 and "Traceback" not in gone.stderr and gone.stderr.strip().splitlines()[-1].startswith("error: cannot reach"), (
        gone.stderr
    )

    again = _serve(serve, port, "killed-2")
    try:
        url2, token2 = again.endpoint_url, again.token
        assert url2 == url and token2 != token  # the same port, a new serve's token
        lost = _longstep(url2, "status", "killed-1", "--output", "json")
        assert lost.returncode != 0 and "killed-1" in lost.stderr and "Traceback" not in lost.stderr  # nothing of it survived
        _until(lambda: _pending(url2), "the new run to park on its first approval", 120)
        assert {a["run_id"] for a in _pending(url2)} == {"killed-2"}
    finally:
        code, out = again.stop(signal.SIGTERM)
        assert code == 0 and out.rstrip().endswith("stopped"), out[-2000:]
