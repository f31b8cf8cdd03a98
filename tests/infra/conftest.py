"""Fixtures for the infrastructure tests: the app is synthesized once per session.

``longstep_kit.local.synth.synthesize()`` caches its assembly per process, so the ``template`` fixture and
any other test folder that synthesizes share one ~10 s synth. Tests get a deep copy, so nothing
here can alter the cached template others see.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from longstep_kit.local import synth

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def load_app_module() -> ModuleType:
    """The repository's ``app.py`` (a script, not an installed module), imported by path."""
    return synth.load_app_module()


def resources_of_type(template: dict[str, Any], type_name: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource for every resource of ``type_name``."""
    return {lid: res for lid, res in template.get("Resources", {}).items() if res.get("Type") == type_name}


@pytest.fixture(scope="session")
def assembly():
    """The synthesized default stack (cdk.json's ``longstep`` context)."""
    from longstep_kit.local.synth import synthesize

    return synthesize()


@pytest.fixture(scope="session")
def template(assembly) -> dict[str, Any]:
    """The synthesized CloudFormation template as a plain dict."""
    return copy.deepcopy(assembly.template)


@pytest.fixture(scope="session")
def cdk_template(template):
    """The same template wrapped for ``aws_cdk.assertions``."""
    from aws_cdk.assertions import Template

    return Template.from_json(template)


@pytest.fixture(scope="session")
def definitions(template) -> dict[str, dict[str, Any]]:
    """Logical id -> resolved ASL definition of every state machine."""
    from longstep_kit.testing.asl import state_machine_definitions

    return state_machine_definitions(template)


@pytest.fixture(scope="session")
def definition(definitions) -> dict[str, Any]:
    """The stack's single state machine definition."""
    assert len(definitions) == 1, f"expected one state machine, found {sorted(definitions)}"
    return next(iter(definitions.values()))


@pytest.fixture(scope="session")
def states(definition) -> dict[str, dict[str, Any]]:
    """Every state by name, including those inside the Map."""
    from longstep_kit.testing.asl import all_states

    return all_states(definition)
