"""``longstep local run --approve interactive`` prints each request's decision page link: a person
decides on the page, presses Enter, and the run goes on with that decision.

The command runs in a subprocess with its stdin and stderr piped; this test plays the person: it
reads each printed link, opens the page, posts the form's approval (as a browser would, with the
page's CSRF token), and presses Enter. Every wait is bounded.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT = 240  # seconds: the whole run, on a loaded machine


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


def _decide_on_the_page(link: str, name: str) -> str:
    with urllib.request.urlopen(link, timeout=60) as response:
        page = response.read().decode()
    hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    form = urllib.parse.urlencode({**hidden, "name": name, "action": "approve"}).encode()
    with urllib.request.urlopen(urllib.request.Request(link, data=form, method="POST"), timeout=60) as response:
        answer = response.read().decode()
    return re.search(r'<h1 id="outcome">(.*?)</h1>', answer).group(1)


def test_interactive_run_prints_links_that_decide_on_the_page():
    proc = subprocess.Popen(
        [sys.executable, "-m", "longstep_kit.cli", "local", "run", "events/scenarios/triage.json", "--approve", "interactive"],
        cwd=REPO_ROOT,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    errors: queue.Queue[str] = queue.Queue()
    output: list[str] = []
    threading.Thread(target=lambda: [errors.put(line) for line in proc.stderr], daemon=True).start()
    threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True).start()
    outcomes = []
    said: list[str] = []  # stderr, for the failure message
    deadline = time.monotonic() + WAIT
    try:
        while proc.poll() is None or not errors.empty():
            assert time.monotonic() < deadline, f"the interactive run did not finish; stdout: {''.join(output)[-2000:]}"
            try:
                line = errors.get(timeout=1)
            except queue.Empty:
                continue
            said.append(line)
            found = re.match(r"decide in a browser: (http://127\.0\.0\.1:\d+/v1/pages/decide/\S+)$", line.strip())
            if found:
                outcomes.append(_decide_on_the_page(found.group(1), "Tess"))
                proc.stdin.write("\n")  # Enter: decided in the browser
                proc.stdin.flush()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(outcomes) == 2 and all(o.startswith("Approved: Send an email to ") for o in outcomes), "".join(said)[-3000:]
    text = "".join(output)
    assert proc.returncode == 0 and "SUCCEEDED" in text and "send_email 2" in text, text[-2000:]
