"""The public API: one entry point per package, its lists pinned here (as Temporal pins its exports).

Users, docs, examples, the samples and the projects ``longstep init`` writes import only from
``longstep`` (the runtime), ``longstep_kit.constructs`` (CDK constructs), ``longstep_kit.testing``
(the local stack for tests), ``longstep_kit.client`` (runs from an application) and
``longstep_kit.app`` (a project's ``app.py``), and ``longstep.langgraph`` (a LangGraph checkpointer). Changing a list is a
change of the public API: change it here on purpose.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import longstep
import longstep_kit.constructs
import longstep_kit.testing

REPO_ROOT = Path(__file__).resolve().parents[2]

RUNTIME_API = [
    "Agent", "Call", "Effect", "Grant", "IDEMPOTENCY_META_KEY", "LedgerEntry", "McpServer", "McpTool", "NonDeterminismError", "ProbeAnswer", "READ_ITEM_ACTIONS",
    "READ_WRITE_ITEM_ACTIONS", "SCAN_ACTIONS", "Secret", "StepFailedError", "StepInfo", "Table", "ToolContext",
    "ToolInputError", "ToolRegistry", "Verdict", "WRITE_ITEM_ACTIONS", "Workflow", "WorkflowContext", "World",
    "__version__", "clients", "clock", "tool",
]  # fmt: skip
CONSTRUCTS_API = [
    "AgentObservability", "AgentObservabilityProps", "AgentResources", "ApprovalApi", "ApprovalApiProps",
    "ApprovalNotifications", "ApprovalNotificationsProps", "DurableAgent", "DurableAgentProps", "DurableStorage",
    "DurableWorkflow", "DurableWorkflowProps", "RuntimeLayer",
]  # fmt: skip
TESTING_API = [
    "Fault", "LocalRunError", "LocalStack", "agent_items", "agent_tables", "RunOptions", "WaitTimeoutError", "all_states", "load_scenario",
    "random_faults", "run_scenario", "state_machine_definitions", "unmet_expectations", "wait_execution", "wait_until",
    "CampaignPlan", "CampaignResult", "FAULT_POINTS", "run_campaign",
]  # fmt: skip
# The LangGraph checkpointer (docs/langgraph.md): a public module of its own, with the optional
# dependency langgraph-checkpoint (the `langgraph` extra); `import longstep` does not load it.
LANGGRAPH_API = ["LongstepSaver"]
PUBLIC_MODULES = {"longstep", "longstep.langgraph", "longstep_kit.constructs", "longstep_kit.testing", "longstep_kit.app", "longstep_kit.client"}
IMPORT = re.compile(r"^\s*(?:from\s+(longstep[\w.]*)\s+import|import\s+(longstep[\w.]*))", re.MULTILINE)
# examples/your_agent/ re-exports the project template's agent (its one copy) for this repository's
# tests: it imports the kit's package data, and no doc shows it.
TEMPLATE_REEXPORT = REPO_ROOT / "examples" / "your_agent" / "__init__.py"
USER_FACING = sorted(
    [
        *(path for path in REPO_ROOT.glob("examples/**/*.py") if path != TEMPLATE_REEXPORT),
        *REPO_ROOT.glob("agents/*.py"),
        *REPO_ROOT.glob("infra/templates/project/**/*.py"),
        *REPO_ROOT.glob("docs/*.md"),
        REPO_ROOT / "README.md",
        REPO_ROOT / "app.py",
    ]
)


@pytest.mark.parametrize(
    ("module", "pinned"),
    [(longstep, RUNTIME_API), (longstep_kit.constructs, CONSTRUCTS_API), (longstep_kit.testing, TESTING_API)],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_the_public_lists_are_pinned_and_every_name_resolves(module, pinned):
    assert sorted(module.__all__) == sorted(pinned)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module.__name__}.{name}"
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_the_langgraph_module_exports_the_saver():
    import longstep.langgraph

    assert longstep.langgraph.__all__ == LANGGRAPH_API
    assert longstep.langgraph.LongstepSaver.__module__ == "longstep.langgraph.saver"


def test_the_client_exports_one_class():
    import longstep_kit.client

    assert longstep_kit.client.__all__ == ["Client"]


def test_importing_the_runtime_loads_nothing_else_until_a_name_is_used():
    # A Lambda's cold start pays for what it uses: ``import longstep`` loads no submodule but the lazy loader.
    code = "import sys, longstep; a = sorted(m for m in sys.modules if m.startswith('longstep')); longstep.Agent; print(a, 'longstep.agent' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "['longstep', 'longstep.exports'] True"


@pytest.mark.parametrize("path", USER_FACING, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_user_facing_code_imports_only_the_public_api(path):
    imported = {a or b for a, b in IMPORT.findall(path.read_text())}
    assert sorted(imported - PUBLIC_MODULES) == [], f"{path.relative_to(REPO_ROOT)}: import these names from the public API instead"
