"""Shared test setup: the project's agents importable (as the functions' code asset has them), a region, no network."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
EVENTS_DIR = REPO_ROOT / "events"

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")
# Credentials that can never reach a real account: moto answers every call.
for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}.items():
    os.environ[name] = value


def campaign(cases: list, keep) -> list:
    """The cases of an exhaustive campaign, for ``pytest.mark.parametrize``: those ``keep(case)``
    picks (a representative of each kind of fault) run in the suite; the others carry the
    ``campaign`` mark, which the suite deselects (pyproject.toml) and ``make campaign`` runs."""
    return [case if keep(case) else pytest.param(*(case if isinstance(case, tuple) else (case,)), marks=pytest.mark.campaign) for case in cases]


@pytest.fixture(autouse=True, scope="session")
def _botocore_models_read_once():
    """moto starts each mock with a fresh boto3 session, whose loader reads botocore's JSON models
    again: a third of the functional tests' time. Every loader of the session shares what earlier
    ones read (longstep_kit.local.moto_patches.parsing; the documents are the same files)."""
    import botocore.session

    from longstep_kit.local.moto_patches.parsing import loaders_share_models

    patched = pytest.MonkeyPatch()
    patched.setattr(botocore.session, "create_loader", loaders_share_models(botocore.session.create_loader))
    yield
    patched.undo()


# The order files are handed to the workers in (make test: `--dist loadfile --no-loadscope-reorder`):
# the long end-to-end files first, the quick unit files last, so that the two workers finish
# together instead of one waiting while the other runs a long file it got last.
_DIRECTORY_ORDER = ("local", "browser", "infra", "functional", "unit")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        parts = Path(str(item.path)).relative_to(REPO_ROOT / "tests").parts
        return _DIRECTORY_ORDER.index(parts[0]) if len(parts) > 1 and parts[0] in _DIRECTORY_ORDER else len(_DIRECTORY_ORDER)

    items.sort(key=rank)  # stable: each file's tests keep their order
