"""The deployment configuration (``longstep_kit.config``) and how ``app.py`` reports a bad one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from longstep_kit.config import CONTEXT_KEY, ConfigError, DeploymentConfig, load_config
from longstep import settings

from .conftest import REPO_ROOT


@pytest.mark.parametrize("context", [None, {}])
def test_defaults_are_valid(context):
    assert load_config(context) == DeploymentConfig()


def test_cdk_json_context_is_valid():
    cdk_json = json.loads((REPO_ROOT / "cdk.json").read_text())
    config = load_config(cdk_json["context"][CONTEXT_KEY])
    assert isinstance(config, DeploymentConfig)


def test_a_valid_override_is_applied():
    config = load_config({"max_turns": 3, "log_retention_days": 14, "stack_name": "Longstep-dev"})
    assert (config.max_turns, config.log_retention_days, config.stack_name) == (3, 14, "Longstep-dev")


@pytest.mark.parametrize(
    ("context", "key"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"log_retention_days": 13}, "log_retention_days"),
        ({"unknown_key": 1}, "unknown_key"),
        ({"stack_name": "1bad"}, "stack_name"),
        ({"model_id": 7}, "model_id"),
        ({"map_max_concurrency": 41}, "map_max_concurrency"),
        ({"customer_managed_key": "yes"}, "customer_managed_key"),
    ],
)
def test_a_bad_value_names_its_key(context, key):
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert f"{CONTEXT_KEY}.{key}" in str(info.value)


def test_every_bad_key_is_named():
    with pytest.raises(ConfigError) as info:
        load_config({"max_turns": 0, "stack_name": "1bad"})
    assert "longstep.max_turns" in str(info.value) and "longstep.stack_name" in str(info.value)


@pytest.mark.parametrize("context", [[], "max_turns=3", 3])
def test_a_non_object_is_rejected(context):
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert CONTEXT_KEY in str(info.value)


@pytest.mark.parametrize(
    ("field", "runtime_default"),
    [
        ("model_id", settings.DEFAULT_MODEL_ID),
        ("offload_threshold_bytes", settings.DEFAULT_OFFLOAD_THRESHOLD_BYTES),
        ("retention_days", settings.DEFAULT_RETENTION_DAYS),
        ("max_turns", settings.DEFAULT_MAX_TURNS),
    ],
)
def test_deployment_defaults_match_runtime_defaults(field, runtime_default):
    assert getattr(DeploymentConfig(), field) == runtime_default


def test_app_exits_2_naming_the_bad_key(tmp_path):
    """``cdk.App()`` reads the context from CDK_CONTEXT_JSON, as the CDK CLI passes it."""
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({CONTEXT_KEY: {"max_turns": 0}}),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    }
    done = subprocess.run([sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "longstep.max_turns" in done.stderr
    assert not (tmp_path / "cdk.out" / "manifest.json").exists()


def test_deployed_max_turns_is_the_default_turn_limit():
    """A run that names no limit gets the one the stack deployed (StartInput: 'the stack's default')."""
    from longstep import keys
    from longstep.tasks.init_run import start_run
    from longstep.agent import Agent
    from longstep.runtime import Runtime
    from longstep.settings import Settings
    from longstep.tools.registry import ToolRegistry
    from longstep.inmemory import InMemoryStore

    deployed = {
        settings.ENV_CHECKPOINT_TABLE: "checkpoints",
        settings.ENV_IDEMPOTENCY_TABLE: "idempotency",
        settings.ENV_ARTIFACT_BUCKET: "artifacts",
        settings.ENV_MAX_TURNS: "3",
    }
    store = InMemoryStore()
    rt = Runtime(
        settings=Settings.from_env(deployed),
        store=store,
        artifacts=None,
        lock=None,
        resolve_agent=lambda name: Agent(name=name, system_prompt="", tools=ToolRegistry()),
    )
    start_run(rt, {"run_id": "r1", "goal": "g", "agent": "any"})
    assert store.get("r1", keys.RUN_RECORD)["max_turns"] == 3


def test_a_retention_shorter_than_twice_the_longest_wait_is_refused():
    with pytest.raises(ConfigError, match=r"^longstep\.retention_days: 10 days is too short .* use at least 14$"):
        load_config({"retention_days": 10})  # escalations wait 7 days
    with pytest.raises(ConfigError, match=r"^longstep\.retention_days: 20 days .*approval_timeout_hours 336.* use at least 28$"):
        load_config({"retention_days": 20, "approval_timeout_hours": 336})
    assert load_config({"retention_days": 28, "approval_timeout_hours": 336}).retention_days == 28
