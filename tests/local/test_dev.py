"""``longstep dev``: one command serves the stack with the run UI and starts the scenario's run.

Driven as a developer would: the command in a process of its own, its output read as it comes,
the one URL it prints opened over HTTP, and Ctrl-C at the end."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.request

from longstep_kit.local.serve import free_port
from tests.local.conftest import LONGSTEP, REPO_ROOT, as_from_a_terminal, interrupt, serve_env, until


def test_dev_serves_the_ui_at_one_url_and_follows_the_started_run(tmp_path):
    log = tmp_path / "dev.log"
    argv = [*LONGSTEP, "dev", "--port", str(free_port()), "--pages-port", str(free_port())]
    argv += ["--scenario", "events/scenarios/triage.json", "--run-id", "dev-1", "--input-out", str(tmp_path / "start.json"), "--start"]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=serve_env(), stdout=out, stderr=subprocess.STDOUT, text=True, preexec_fn=as_from_a_terminal)
    try:
        # The run starts by itself and parks on its first approval; its steps are printed as they happen.
        until(lambda: "approval[0]      pending" in log.read_text() or proc.poll() is not None, "the run to park on its approval", 180)
        assert proc.poll() is None, log.read_text()[-3000:]
        text = log.read_text()
        (url,) = re.findall(r"^run UI: (http://127\.0\.0\.1:\d+/\?token=\S+)", text, re.M)
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the link trades its token for a cookie
        with browser.open(url, timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        assert "hot reload: edited agent code runs on the next invocation" in text
        assert "run dev-1: started (new run)" in text and "turn 0   model            executed -> tools: search_docs" in text
    finally:
        code = interrupt(proc, signal.SIGINT) if proc.poll() is None else proc.returncode
    assert code == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text()


def test_dev_start_without_a_scenario_is_one_line(tmp_path):
    done = subprocess.run([*LONGSTEP, "dev", "--start"], cwd=REPO_ROOT, env=serve_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[0].startswith("error: --start: name the scenario to start"), done.stderr
