"""The runtime layer directory (``longstep_kit.bundling``), built from the existing cache.

pip is replaced by a stub that fails the test, so these tests never download anything: the
caches (the layer under ``.longstep/layer-cache``, its third-party packages in the machine's shared
cache, ``bundling.shared_cache()``), built by ``make setup``, must already be complete.
"""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from longstep_kit import bundling

RUNTIME_SRC = bundling.RUNTIME_SOURCE
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = bundling.default_cache(REPO_ROOT)


def _no_pip(*args, **kwargs):
    pytest.fail(f"the test tried to run pip: {args[0] if args else kwargs}; run `make setup` to fill the layer cache")


@pytest.fixture(scope="module")
def layer_dir() -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bundling, "subprocess", SimpleNamespace(run=_no_pip))
        return bundling.build_layer(CACHE)


def test_layer_comes_from_the_cache(layer_dir):
    assert layer_dir.parent == CACHE
    assert (layer_dir / ".complete").is_file()


def test_layer_holds_the_runtime_and_its_dependencies(layer_dir):
    python = layer_dir / "python"
    assert (python / "longstep" / "__init__.py").is_file()
    assert (python / "pydantic").is_dir()
    assert (python / "aws_lambda_powertools").is_dir()


def test_layer_holds_runtime_code_only(layer_dir):
    present = {p.name for p in (layer_dir / "python").iterdir()}
    # Not the kit (CDK, local stack, CLI), not the agents (the functions' code asset), not test or deploy-time tooling,
    # not the SDK the Lambda runtime already has.
    forbidden = {"longstep_kit", "agents", "tests", "moto", "aws_cdk", "constructs", "jsii", "boto3", "botocore"}
    assert not present & forbidden, sorted(present & forbidden)
    assert not list((layer_dir / "python").rglob("__pycache__"))


def test_layer_runtime_is_the_current_source(layer_dir):
    copied = layer_dir / "python" / "longstep"
    source_files = sorted(p.relative_to(RUNTIME_SRC) for p in RUNTIME_SRC.rglob("*.py") if "__pycache__" not in p.parts)
    layer_files = sorted(p.relative_to(copied) for p in copied.rglob("*.py"))
    assert layer_files == source_files
    _, mismatch, errors = filecmp.cmpfiles(RUNTIME_SRC, copied, [str(p) for p in source_files], shallow=False)
    assert mismatch == [] and errors == []


def test_compiled_dependencies_target_lambda(layer_dir):
    tag = bundling.LAMBDA_PYTHON_VERSION.replace(".", "")
    binaries = list((layer_dir / "python" / "pydantic_core").glob("_pydantic_core.*.so"))
    assert binaries, "pydantic_core has no compiled module"
    assert all(f"cpython-{tag}-x86_64-linux-gnu" in b.name for b in binaries), [b.name for b in binaries]


def test_build_is_cached_and_stable(layer_dir, monkeypatch):
    monkeypatch.setattr(bundling, "subprocess", SimpleNamespace(run=_no_pip))
    assert bundling.build_layer(CACHE) == layer_dir


def test_synthesized_layer_asset_is_this_layer(assembly, layer_dir):
    layers = [r for r in assembly.template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    (layer,) = layers
    asset_hash = layer["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    staged = assembly.assets[asset_hash] / "python"
    assert (staged / "longstep" / "__init__.py").read_bytes() == (layer_dir / "python" / "longstep" / "__init__.py").read_bytes()
    assert not (assembly.assets[asset_hash] / ".complete").exists()


def test_build_layer_accepts_another_runtime_source(tmp_path, monkeypatch):
    source = tmp_path / "longstep"
    shutil.copytree(bundling.RUNTIME_SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))

    def fake_pip(cmd, **kwargs):  # installs a stand-in package where pip would
        target = Path(cmd[cmd.index("--target") + 1])
        (target / "fakedep").mkdir(parents=True)
        (target / "fakedep" / "__init__.py").write_text("")
        return SimpleNamespace(returncode=0, stderr="")

    monkeypatch.setattr(bundling, "subprocess", SimpleNamespace(run=fake_pip))
    out = bundling.build_layer(tmp_path / "cache", runtime_source=source, deps_cache=tmp_path / "shared")
    assert (out / "python" / "fakedep" / "__init__.py").is_file()
    assert (out / "python" / "longstep" / "__init__.py").is_file()


def test_function_code_holds_the_entry_points_and_the_configured_agents_packages(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "__init__.py").write_text("")
    (tmp_path / "mine" / "bot.py").write_text("def build(): ...\n")
    (tmp_path / "solo.py").write_text("def build(): ...\n")
    (tmp_path / "unrelated.py").write_text("")
    out = bundling.build_function_code(tmp_path, ["mine.bot:build", "solo:build"], tmp_path / "cache")
    assert sorted(p.name for p in out.iterdir() if p.name != ".complete") == ["longstep_functions", "mine", "solo.py"]
    assert (out / "longstep_functions" / "model_turn.py").is_file()
    assert (out / "mine" / "bot.py").read_text() == "def build(): ...\n"


def test_function_code_names_a_missing_package(tmp_path):
    with pytest.raises(bundling.BundlingError, match="no package nowhere/"):
        bundling.build_function_code(tmp_path, ["nowhere.bot:build"], tmp_path / "cache")


def test_a_folder_without_init_gets_the_one_line_fix(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "bot.py").write_text("def build(): ...\n")
    with pytest.raises(bundling.BundlingError, match=r"^agents: mine/ has no __init__.py: add an empty mine/__init__.py"):
        bundling.build_function_code(tmp_path, ["mine.bot:build"], tmp_path / "cache")


def test_the_cli_reports_a_bundling_error_in_one_line_with_a_usage_exit():
    from longstep_kit.cli.errors import EXIT_USAGE, describe

    told = describe(bundling.BundlingError("agents: mine/ has no __init__.py: add an empty mine/__init__.py"))
    assert told is not None and told.code == EXIT_USAGE and str(told) == "agents: mine/ has no __init__.py: add an empty mine/__init__.py"
