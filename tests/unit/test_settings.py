"""Settings.from_env with an explicit environ dict."""

import pytest

from longstep import settings as s
from longstep.settings import Settings, SettingsError

REQUIRED = {
    s.ENV_CHECKPOINT_TABLE: "checkpoints",
    s.ENV_IDEMPOTENCY_TABLE: "idempotency",
    s.ENV_ARTIFACT_BUCKET: "artifacts",
}
INT_VARS = [s.ENV_OFFLOAD_THRESHOLD_BYTES, s.ENV_MAX_TURNS, s.ENV_RETENTION_DAYS]


def test_required_values_are_read():
    cfg = Settings.from_env(dict(REQUIRED))
    assert (cfg.checkpoint_table, cfg.idempotency_table, cfg.artifact_bucket) == ("checkpoints", "idempotency", "artifacts")


def test_defaults_apply_when_optional_vars_are_absent():
    cfg = Settings.from_env(dict(REQUIRED))
    assert cfg == Settings(checkpoint_table="checkpoints", idempotency_table="idempotency", artifact_bucket="artifacts")
    assert cfg.max_turns > 0 and cfg.offload_threshold_bytes > 0 and cfg.retention_days > 0


def test_blank_optional_vars_fall_back_to_defaults():
    env = {**REQUIRED, **{name: "  " for name in INT_VARS}, s.ENV_MODEL_ID: " "}
    assert Settings.from_env(env) == Settings.from_env(dict(REQUIRED))


@pytest.mark.parametrize("name", sorted(REQUIRED))
@pytest.mark.parametrize("value", [None, "", "   "])
def test_missing_required_var_is_named(name, value):
    env = dict(REQUIRED)
    if value is None:
        del env[name]
    else:
        env[name] = value
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    assert name in str(info.value)
    assert isinstance(info.value, ValueError)


def test_overrides_are_parsed_and_stripped():
    env = {
        **REQUIRED,
        s.ENV_CHECKPOINT_TABLE: "  cp  ",
        s.ENV_MODEL_ID: "some-model",
        s.ENV_OFFLOAD_THRESHOLD_BYTES: " 2048 ",
        s.ENV_MAX_TURNS: "7",
        s.ENV_RETENTION_DAYS: "3",
    }
    cfg = Settings.from_env(env)
    assert cfg.checkpoint_table == "cp"
    assert cfg.model_id == "some-model"
    assert (cfg.offload_threshold_bytes, cfg.max_turns, cfg.retention_days) == (2048, 7, 3)


@pytest.mark.parametrize("name", INT_VARS)
@pytest.mark.parametrize("raw", ["ten", "1.5", "0x10"])
def test_bad_integer_is_named_with_its_value(name, raw):
    with pytest.raises(SettingsError) as info:
        Settings.from_env({**REQUIRED, name: raw})
    assert name in str(info.value)
    assert raw in str(info.value)


@pytest.mark.parametrize("name", INT_VARS)
@pytest.mark.parametrize("raw", ["0", "-5"])
def test_non_positive_integer_is_rejected(name, raw):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({**REQUIRED, name: raw})


def test_reads_os_environ_by_default(monkeypatch):
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(s.ENV_MAX_TURNS, "12")
    assert Settings.from_env().max_turns == 12


def test_explicit_empty_environ_is_not_replaced_by_os_environ(monkeypatch):
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError):
        Settings.from_env({})


def test_settings_are_immutable():
    cfg = Settings.from_env(dict(REQUIRED))
    with pytest.raises(AttributeError):
        cfg.max_turns = 1
