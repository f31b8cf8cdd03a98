"""The synth cache (``longstep_kit.local.synth``): a second synth of unchanged inputs is reused,
and any input synth reads changes the digest."""

from __future__ import annotations

import shutil
from pathlib import Path

from longstep_kit.local import synth
from longstep_kit.project import cdk_context

REPO_ROOT = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path) -> Path:
    for name in ("app.py", "cdk.json"):
        shutil.copy2(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "agents", tmp_path / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_digest_is_stable_and_follows_every_input(tmp_path):
    project = _project(tmp_path)
    context = cdk_context(project)
    first = synth.inputs_digest(project, context)
    assert synth.inputs_digest(project, context) == first
    # the agents' code
    (project / "agents" / "triage.py").write_text((project / "agents" / "triage.py").read_text() + "\n# changed\n")
    changed_agent = synth.inputs_digest(project, context)
    assert changed_agent != first
    # the context (an override as tests pass it)
    changed_context = synth.inputs_digest(project, {**context, "longstep": {**context["longstep"], "max_turns": 7}})
    assert changed_context not in (first, changed_agent)
    # app.py
    (project / "app.py").write_text((project / "app.py").read_text() + "\n")
    assert synth.inputs_digest(project, context) not in (first, changed_agent)


def test_a_cached_assembly_is_loaded_without_synth(assembly, monkeypatch):
    """The session's assembly came from the disk cache's layout: loading it again needs no CDK."""
    monkeypatch.setattr(synth, "load_app_module", lambda *a: (_ for _ in ()).throw(AssertionError("synth ran")))
    loaded = synth._load(assembly.project, assembly.outdir)
    assert loaded.template == assembly.template and loaded.assets == assembly.assets
