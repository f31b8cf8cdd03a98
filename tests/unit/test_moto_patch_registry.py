"""The moto patch registry: every patch of the local stack goes through it, is marked as a fidelity
fix (with the AWS pages it follows), a speed patch or the harness, and a patch of an attribute moto
lacks fails at once, naming the patch, instead of silently changing nothing after an upgrade."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from moto.dynamodb.responses import DynamoHandler

import longstep_kit.local.asl_strictness
import longstep_kit.local.fault_kinds
import longstep_kit.local.variables  # noqa: F401 (its patch joins the catalogue)
from longstep_kit.local import moto_patches
from longstep_kit.local.moto_patches import registry

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL = REPO_ROOT / "infra" / "local"
# The patch functions outside the package (they import the registry, so it cannot import them).
ELSEWHERE = {
    "choice_on_an_absent_path_fails",
    "states_all_spares_terminal_errors",
    "history_limit",
    "closed_tokens_refused",
    "map_and_parallel_keep_states_errors",
    "variables_by_reference",
    "lost_acknowledgements",
}
REGISTRY_API = {"CATALOGUE", "FIDELITY", "HARNESS", "SPEED", "MissingMotoAttribute", "add", "applied", "patch", "undo", "undo_all"}


@pytest.fixture
def scratch():
    """Patch functions a test marks leave the catalogue, and what they patch is put back."""
    known = set(registry.CATALOGUE)
    yield
    moto_patches.undo_all()
    for name in set(registry.CATALOGUE) - known:
        del registry.CATALOGUE[name]


def test_a_patch_of_an_attribute_moto_lacks_fails_naming_the_patch(scratch):
    @registry.speed
    def answers_made_faster() -> None:
        registry.patch(DynamoHandler, "get_item", lambda handler: None)  # there: applied
        registry.patch(DynamoHandler, "get_item_faster", lambda handler: None)  # not in moto

    with pytest.raises(registry.MissingMotoAttribute) as refused:
        answers_made_faster()
    message = str(refused.value)
    assert message.startswith("moto patch 'answers_made_faster': moto.dynamodb.responses.DynamoHandler.get_item_faster is not in moto ")
    assert "update the patch to the new moto, or drop it" in message
    assert not hasattr(DynamoHandler, "get_item_faster")
    moto_patches.undo_all()  # what the stack's start does when a patch fails: moto as shipped
    assert "get_item" in vars(DynamoHandler) and not moto_patches.applied()


def test_an_addition_moto_now_has_fails_naming_the_patch(scratch):
    @registry.fidelity("https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_GetItem.html")
    def get_item_added() -> None:
        registry.add(DynamoHandler, "get_item", lambda handler: None)

    with pytest.raises(registry.MissingMotoAttribute, match=r"^moto patch 'get_item_added': .*DynamoHandler\.get_item is in moto .* now"):
        get_item_added()
    registry.add(DynamoHandler, "longstep_added", 1)  # an API moto lacks is added ...
    moto_patches.undo_all()
    assert not hasattr(DynamoHandler, "longstep_added")  # ... and taken away again


def test_undo_puts_back_one_attribute_and_leaves_the_rest():
    original = DynamoHandler.get_item
    try:
        registry.patch(DynamoHandler, "get_item", None)
        registry.patch(DynamoHandler, "query", None)
        registry.undo(DynamoHandler, "get_item")
        registry.undo(DynamoHandler, "get_item")  # not patched now: nothing to do
        assert DynamoHandler.get_item is original and DynamoHandler.query is None
        assert moto_patches.applied() == [(DynamoHandler, "query")]
    finally:
        moto_patches.undo_all()


def test_a_fidelity_fix_must_cite_an_aws_documentation_page():
    for pages in ((), ("https://github.com/getmoto/moto/issues/1",)):
        with pytest.raises(ValueError, match="cites the AWS documentation pages it follows"):
            registry.fidelity(*pages)


def test_every_patch_function_of_the_local_stack_is_marked():
    exported = set(moto_patches.__all__) - REGISTRY_API
    assert exported | ELSEWHERE == set(registry.CATALOGUE)
    for name in exported:
        assert getattr(moto_patches, name).__longstep_patch__ is registry.CATALOGUE[name]
    kinds = Counter(marked.kind for marked in registry.CATALOGUE.values())
    # Fidelity fixes change what moto answers (each with its pages); speed patches never do.
    assert kinds == {registry.FIDELITY: 15, registry.SPEED: 14, registry.HARNESS: 5}, kinds
    for marked in registry.CATALOGUE.values():
        assert (marked.kind == registry.FIDELITY) == bool(marked.pages), marked


def test_no_module_of_the_local_stack_replaces_an_attribute_outside_the_registry():
    # A class's or a module's attribute set directly (an instance's own state, such as a pending
    # stop kept on an execution worker, is not a patch).
    assignment = re.compile(r"^\s*(?:setattr\((?:[A-Z]\w*|module|owner|cls)\b|[A-Z]\w*(?:\.\w+)+ = )", re.MULTILINE)
    offenders = {
        path.relative_to(REPO_ROOT).as_posix(): found
        for path in sorted(LOCAL.rglob("*.py"))
        if path.name != "registry.py" and (found := assignment.findall(path.read_text()))
    }
    assert offenders == {}
