"""The numbers every loop function reads are declared once (``longstep.settings.TUNABLES``): each
is a key of the deployment configuration, a field of the construct's props and of the runtime's
settings, with one default; the stack writes what the props hold and the runtime reads it back."""

from __future__ import annotations

import dataclasses

import pytest

from longstep import settings
from longstep_kit.config import DeploymentConfig
from longstep_kit.constructs.durable_agent_props import DurableAgentProps

PROPS = {field.name: field for field in dataclasses.fields(DurableAgentProps)}
SETTINGS = {field.name: field for field in dataclasses.fields(settings.Settings)}
# The configuration leaves it unset: the stack computes it from the history a turn may add.
COMPUTED = {"turns_per_execution"}


@pytest.mark.parametrize("tunable", settings.TUNABLES, ids=lambda t: t.name)
def test_a_tunable_has_one_name_and_one_default_in_every_layer(tunable):
    config_default = DeploymentConfig.model_fields[tunable.name].default
    assert config_default == (None if tunable.name in COMPUTED else tunable.default)
    assert PROPS[tunable.name].default == SETTINGS[tunable.name].default == tunable.default
    assert tunable.variable.startswith("LONGSTEP_") and tunable.variable in vars(settings).values()


def test_the_runtime_reads_each_tunable_back_from_its_variable():
    environ = {tunable.variable: str(tunable.default + 1) for tunable in settings.TUNABLES}
    read = settings.Settings.from_env(environ, required=())
    assert {tunable.name: getattr(read, tunable.name) for tunable in settings.TUNABLES} == {t.name: t.default + 1 for t in settings.TUNABLES}
    defaults = settings.Settings.from_env({}, required=())
    assert all(getattr(defaults, t.name) == t.default for t in settings.TUNABLES)
