"""Edit and rerun without a synth: the template depends on the agents' declarations, not on the
bytes of their code (``longstep_kit.local.synth``), and a served stack runs edited code on its
next invocation (``longstep_kit.local.reload``).

Each test works on a copy of the repository's project in a temporary directory (the same
declarations give the same digest wherever the project lives, and the synth cache is the
machine's: the session's assembly serves the copy), and drives it as a developer would: ``longstep local run`` and ``local serve`` in
processes of their own, an edit with the editor in between.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.local.conftest import LONGSTEP, REPO_ROOT, serve_env, start_served, until

SCENARIO = "events/scenarios/triage.json"
# The line of the triage agent's send_email result, and an edit of it: a new key in the result.
RESULT_LINE = 'return {"sent": True, "to": to, "subject": subject}'
EDITED_LINE = 'return {"sent": True, "to": to, "subject": subject, "edited_by": "hot reload"}'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The repository's app, agents and scenarios copied; the session's assembly synthesized (the copy's own)."""
    from longstep_kit.local.synth import synthesize

    target = tmp_path / "project"
    target.mkdir()
    for name in ("app.py", "cdk.json"):
        shutil.copy2(REPO_ROOT / name, target / name)
    for name in ("agents", "events"):
        shutil.copytree(REPO_ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    synthesize(project=REPO_ROOT)
    return target


def _local_run(project: Path, report: Path) -> tuple[str, dict]:
    done = subprocess.run(
        [*LONGSTEP, "local", "run", SCENARIO, "--report", str(report)], cwd=project, env=serve_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr, json.loads(report.read_text())


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new))


def test_a_code_only_edit_reuses_the_template_and_the_new_code_runs(project, tmp_path):
    triage = project / "agents" / "triage.py"
    _edit(triage, RESULT_LINE, EDITED_LINE)
    out, edited = _local_run(project, tmp_path / "edited.json")
    assert "synthesizing" not in out, out  # the seeded template was reused
    assert edited["status"] == "SUCCEEDED"

    _edit(triage, EDITED_LINE, RESULT_LINE)
    out, clean = _local_run(project, tmp_path / "clean.json")
    assert "synthesizing" not in out, out
    # send_email's result is in the model's transcript: the edited code ran, then the original again.
    assert edited["transcript_sha256"] != clean["transcript_sha256"]
    assert edited["effects"] == clean["effects"]


def _synthesizes(project: Path) -> subprocess.CompletedProcess:
    """Ask the synth cache for the project's assembly, with the synth itself replaced by an exit
    (code 3) so that what is checked is whether a synth would start, and what it says first."""
    script = (
        "import sys\nfrom pathlib import Path\nfrom longstep_kit.local import synth\n"
        "synth._synth = lambda *a: sys.exit(3)\n"
        f"synth.synthesize(project=Path({str(project)!r}), progress=print)\n"
    )
    return subprocess.run([sys.executable, "-c", script], cwd=project, env=serve_env(), capture_output=True, text=True, timeout=300)


def test_a_declaration_edit_synthesizes_again_and_says_so_first(project):
    reused = _synthesizes(project)
    assert reused.returncode == 0 and reused.stdout == "", reused.stdout + reused.stderr
    _edit(project / "agents" / "triage.py", RESULT_LINE, EDITED_LINE)  # code: still reused
    assert _synthesizes(project).returncode == 0
    # A declaration: the condition the agent's CheckCondition polls is renamed.
    _edit(project / "agents" / "triage.py", 'conditions={"ticket_status":', 'conditions={"ticket_state":')
    changed = _synthesizes(project)
    assert changed.returncode == 3, changed.stdout + changed.stderr
    assert changed.stdout.startswith("agents' declarations, configuration or kit changed: synthesizing the CDK app, about "), changed.stdout


def test_a_served_stack_runs_edited_code_on_the_next_invocation_and_the_parked_run_goes_on(project, tmp_path):
    served = start_served(tmp_path, project=project, run_id="hot-1")
    env, url = serve_env(), served.endpoint_url

    def longstep(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([*LONGSTEP, *argv, "--endpoint-url", url], cwd=project, env=env, capture_output=True, text=True, timeout=120)

    try:
        started = longstep("start", "--input", str(served.start))
        assert started.returncode == 0, started.stderr
        first = until(lambda: json.loads(longstep("approvals", "--output", "json").stdout), "the run to park on its first approval")
        # The run is parked on send_email's approval; the tool is edited meanwhile.
        _edit(project / "agents" / "triage.py", RESULT_LINE, EDITED_LINE)
        decided = longstep("approve", first[0]["approval_id"])
        assert decided.returncode == 0, decided.stderr
        second = until(
            lambda: [a for a in json.loads(longstep("approvals", "--output", "json").stdout) if a["approval_id"] != first[0]["approval_id"]],
            "the run to go on to its second approval",
        )
        assert longstep("approve", second[0]["approval_id"]).returncode == 0
        until(lambda: json.loads(longstep("status", "hot-1", "--output", "json").stdout).get("status") == "succeeded", "the run to finish")
        exported = longstep("export", "hot-1")  # the run's transcript: every tool result the model saw
        assert exported.returncode == 0, exported.stderr
    finally:
        code, out = served.stop()
    assert code == 0, out[-3000:]
    assert "reloaded: agents/triage.py changed" in out, out[-3000:]
    # send_email, approved after the edit, returned the edited result (the original has no such key).
    assert '"edited_by": "hot reload"' in exported.stdout, exported.stdout[-3000:]


def test_a_scenario_reruns_on_the_served_stack_with_the_edited_code(project, tmp_path):
    # The loop `longstep dev` prints: edit a tool, run the scenario again on the served stack
    # (no deploy of its own), see the edit in the run; undo it, and the run is the clean one again.
    served = start_served(tmp_path, project=project, run_id="rerun")

    def rerun(name: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
        report = tmp_path / f"{name}.json"
        argv = [*LONGSTEP, "local", "run", SCENARIO, "--endpoint-url", served.endpoint_url, "--report", str(report), *extra]
        done = subprocess.run(argv, cwd=project, env=serve_env(), capture_output=True, text=True, timeout=300)
        return done, json.loads(report.read_text()) if report.exists() else {}

    try:
        refused, _ = rerun("refused", "--token", "not-the-token")
        assert refused.returncode == 3 and refused.stderr.count("\n") == 1, refused.stderr
        assert "token is missing or wrong" in refused.stderr
        first, clean = rerun("first", "--token", served.token)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        assert "the run starts from the scenario's world" in first.stdout and "turn 8   model" in first.stdout
        _edit(project / "agents" / "triage.py", RESULT_LINE, EDITED_LINE)
        done, edited = rerun("edited", "--token", served.token, "--quiet")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        _edit(project / "agents" / "triage.py", EDITED_LINE, RESULT_LINE)
        done, again = rerun("again", "--token", served.token, "--quiet", "--fault", "after_effect@5")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        code, out = served.stop()
    assert code == 0, out[-3000:]
    assert clean["status"] == edited["status"] == again["status"] == "SUCCEEDED"
    # send_email's result is in the transcript: the edited code ran, then the original again (a
    # crash after its effect on the way: the probe answers, the transcript is the clean one).
    assert edited["transcript_sha256"] != clean["transcript_sha256"] == again["transcript_sha256"]
    assert edited["effects"] == clean["effects"] == again["effects"]
    assert out.count("reloaded: agents/triage.py changed") >= 2, out[-3000:]
