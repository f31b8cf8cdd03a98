"""The synth cache (``longstep_kit.local.synth``): a second synth of unchanged inputs is reused,
and what the template depends on changes the digest; the agents' code does not."""

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


def test_digest_follows_the_declarations_and_the_context_not_the_agents_code(tmp_path):
    """The template depends on what the agents declare, not on their code: a tool's body edited
    keeps the digest (the run reuses the template, its code asset rebuilt), anything synth reads
    of the declarations, the context or app.py changes it. Digests of the same declarations read
    in this process are the ones another process reads (tests/local/test_edit_and_rerun.py edits
    the copied agent and asks a fresh process)."""
    project = _project(tmp_path)
    context = cdk_context(project)
    first = synth.inputs_digest(project, context)
    assert synth.inputs_digest(project, context) == first
    assert synth.inputs_digest(REPO_ROOT, context) == first  # the same project elsewhere: the same digest
    # the context (an override as tests pass it)
    changed_context = synth.inputs_digest(project, {**context, "longstep": {**context["longstep"], "max_turns": 7}})
    assert changed_context != first
    # a declaration: another agent, with resources of its own
    agents = {**context["longstep"]["agents"], "your_agent": "examples.your_agent:build"}
    shutil.copytree(REPO_ROOT / "examples", project / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    assert synth.inputs_digest(project, {**context, "longstep": {**context["longstep"], "agents": agents}}) not in (first, changed_context)
    # app.py
    (project / "app.py").write_text((project / "app.py").read_text() + "\n")
    assert synth.inputs_digest(project, context) != first


def test_a_cached_assembly_is_loaded_without_synth(assembly, monkeypatch):
    """The session's assembly came from the disk cache's layout: loading it again needs no CDK."""
    monkeypatch.setattr(synth, "load_app_module", lambda *a: (_ for _ in ()).throw(AssertionError("synth ran")))
    loaded = synth._load(assembly.project, assembly.outdir)
    assert loaded.template == assembly.template and loaded.assets.keys() == assembly.assets.keys()
    # The functions' code comes from the project as it is now, in place of the staged copy.
    current = synth.with_current_code(loaded, synth.merged_context(assembly.project, None))
    assert current.assets == assembly.assets and loaded.code_asset is not None
    assert (current.assets[loaded.code_asset] / "agents" / "triage.py").read_bytes() == (REPO_ROOT / "agents" / "triage.py").read_bytes()
