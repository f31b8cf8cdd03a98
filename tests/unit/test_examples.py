"""The docs' Python examples are real files under ``examples/``: shown verbatim, imported and run here.

A doc names the file a code block shows with a marker on the line before the block::

    <!-- example: examples/tools/define_tool.py -->
    ```python
    ...the file's content, verbatim...
    ```

so an example cannot drift from the code it documents: the block must equal the file, and the
file is imported and exercised below. A block that shows part of a longer example carries
``<!-- excerpt: examples/... -->`` instead: it must be found in that file word for word.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from longstep import clients
from longstep.environment import use_environment
from longstep.tools.registry import Effect, ProbeAnswer, ToolContext

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "examples"
# An excerpt may also come from what `longstep init` writes: the project template is its one copy.
EXCERPT_ROOTS = ("examples/", "infra/templates/project/")
DOCS = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")])

MARKER = re.compile(r"^<!-- (?P<kind>example|excerpt): (?P<path>\S+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
PYTHON_BLOCK = re.compile(r"^```python\n", re.MULTILINE)
# Docs whose Python blocks are still fragments: their branches (approvals, deploy) convert them.
# Remove a doc from here once its blocks carry markers (a test below says when).
NOT_YET_CONVERTED = {"docs/deploy.md"}


def _relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def doc_examples(text: str, kind: str = "example") -> list[tuple[str, str]]:
    """Every ``(example path, code block)`` a doc's markers of ``kind`` name, in order."""
    return [(match["path"], match["body"]) for match in MARKER.finditer(text) if match["kind"] == kind]


def unmarked_python_blocks(text: str) -> int:
    """How many ```python blocks of a doc carry no example marker."""
    marked = sum(1 for match in MARKER.finditer(text) if match["lang"] == "python")
    return len(PYTHON_BLOCK.findall(text)) - marked


def load_example(relative: str) -> ModuleType:
    """Import ``examples/...py`` as a module of its own (examples are files, not a package)."""
    path = REPO_ROOT / relative
    name = "example_" + "_".join(Path(relative).with_suffix("").parts[1:])
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _all_marked(kind: str = "example") -> list[tuple[str, str, str]]:
    return [(_relative(doc), path, body) for doc in DOCS for path, body in doc_examples(doc.read_text(), kind)]


EXAMPLE_FILES = sorted(_relative(path) for path in EXAMPLES_DIR.rglob("*.py") if path.name != "__init__.py")


def test_the_marker_parser_reads_a_block_and_counts_unmarked_ones():
    text = "intro\n<!-- example: examples/a.py -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
    assert doc_examples(text) == [("examples/a.py", "x = 1\n")]
    assert unmarked_python_blocks(text) == 1
    excerpt = "<!-- excerpt: examples/b.py -->\n```python\nz = 3\n```\n"
    assert doc_examples(excerpt) == [] and doc_examples(excerpt, "excerpt") == [("examples/b.py", "z = 3\n")]
    assert unmarked_python_blocks(excerpt) == 0


@pytest.mark.parametrize(("doc", "path", "body"), _all_marked(), ids=lambda value: str(value)[:60])
def test_a_doc_block_is_its_example_file_verbatim(doc, path, body):
    target = REPO_ROOT / path
    assert path.startswith("examples/") and target.is_file(), f"{doc}: marker names {path}, which is not a file under examples/"
    assert body == target.read_text(), f"{doc}: the block marked {path} differs from the file; paste the file's content"


@pytest.mark.parametrize(("doc", "path", "body"), _all_marked("excerpt"), ids=lambda value: str(value)[:60])
def test_a_doc_excerpt_is_found_in_its_example_file_word_for_word(doc, path, body):
    target = REPO_ROOT / path
    assert path.startswith(EXCERPT_ROOTS) and target.is_file(), f"{doc}: marker names {path}, which is not a file under {' or '.join(EXCERPT_ROOTS)}"
    assert body in target.read_text(), f"{doc}: the block marked as an excerpt of {path} is not found in the file"


@pytest.mark.parametrize("doc", [_relative(doc) for doc in DOCS])
def test_every_python_block_of_a_doc_is_an_example_file(doc):
    text = (REPO_ROOT / doc).read_text()
    markers = text.count("<!-- example:") + text.count("<!-- excerpt:")
    assert markers == len(MARKER.findall(text)), f"{doc}: a marker not directly followed by a code block"
    count = unmarked_python_blocks(text)
    if doc in NOT_YET_CONVERTED:
        assert count > 0, f"{doc} has no unmarked Python block left: remove it from NOT_YET_CONVERTED"
    else:
        assert count == 0, f"{doc}: {count} Python block(s) without an '<!-- example: examples/... -->' marker"


def test_every_example_file_is_shown_in_a_doc():
    shown = {path for _, path, _ in _all_marked() + _all_marked("excerpt")}
    assert EXAMPLE_FILES, "no examples found"
    assert sorted(set(EXAMPLE_FILES) - shown) == []


@pytest.mark.parametrize("relative", EXAMPLE_FILES)
def test_every_example_imports(relative):
    module = load_example(relative)
    assert module.__doc__, f"{relative}: an example starts with a docstring saying what it shows"


def _ctx(turn: int = 0, call: int = 0) -> ToolContext:
    return ToolContext(run_id="r1", turn=turn, call=call, idempotency_key=f"r1:{turn}:{call}")


def test_define_tool_registers_an_at_most_once_tool_that_needs_approval():
    example = load_example("examples/tools/define_tool.py")
    send_email = example.registry.get("send_email")
    assert send_email.effect is Effect.AT_MOST_ONCE and send_email.requires_approval
    assert send_email.description == "Send an email."
    args = send_email.parse_args({"to": "a@example.com", "subject": "hi", "body": "hello"})
    assert send_email.fn(args, _ctx(5, 0)) == {"sent": True, "to": "a@example.com"}
    assert example.outbox == [{"to": "a@example.com", "subject": "hi", "body": "hello", "key": "r1:5:0"}]
    assert send_email.probe(args, _ctx(5, 0)) == ProbeAnswer.happened_with({"sent": True, "to": "a@example.com"})
    assert send_email.probe(args, _ctx(6, 0)) == ProbeAnswer.not_happened()
    send_email.fn(args, _ctx(5, 0))  # a double send: the ledger lists the key twice
    assert [entry.idempotency_key for entry in send_email.ledger("r1")] == ["r1:5:0", "r1:5:0"]
    assert list(send_email.ledger("r2")) == []


def test_the_verifier_example_accepts_a_summary_and_feeds_back_anything_else():
    example = load_example("examples/agents/verifier.py")
    agent = example.build()
    assert (agent.name, agent.max_model_corrections, agent.max_verifier_failures) == ("triage", 3, 2)
    assert agent.verifier("Summary: filed two tickets", []).ok
    verdict = agent.verifier("done", [])
    assert not verdict.ok and "Summary:" in verdict.feedback


def test_the_resources_example_reads_its_table_through_the_bound_name():
    example = load_example("examples/agents/resources.py")
    agent = example.build()
    assert {type(resource).__name__ for resource in agent.resources} == {"Table", "Secret"}
    clients.reset()
    try:
        with mock_aws():
            ddb = boto3.client("dynamodb")
            ddb.create_table(
                TableName="stack-orders",
                KeySchema=[{"AttributeName": "order_id", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "order_id", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            ddb.put_item(TableName="stack-orders", Item={"order_id": {"S": "o-1"}})
            get_order = agent.tools.get("get_order")
            with use_environment({example.orders.variable: "stack-orders"}):
                assert get_order.fn(get_order.parse_args({"order_id": "o-1"}), _ctx()) == {"order_id": "o-1", "found": True}
                assert get_order.fn(get_order.parse_args({"order_id": "o-2"}), _ctx()) == {"order_id": "o-2", "found": False}
    finally:
        clients.reset()


def test_the_start_run_example_starts_an_execution_named_after_the_run():
    from longstep.pinning import ALIAS_NAME  # the example writes the alias out: it must be the deploy's

    example = load_example("examples/runs/start_run.py")
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:Longstep"
    execution_arn = "arn:aws:states:us-east-1:123456789012:execution:Longstep:triage-001"
    with Stubber(sfn) as stub:
        stub.add_response(
            "start_execution",
            {"executionArn": execution_arn, "startDate": "2026-11-30T00:00:00Z"},
            {
                "stateMachineArn": f"{arn}:{ALIAS_NAME}",
                "name": "triage-001",
                "input": '{"run_id": "triage-001", "goal": "Triage the backlog", "agent": "triage"}',
            },
        )
        assert example.start_run(arn, "triage-001", "Triage the backlog", sfn=sfn) == execution_arn
        stub.assert_no_pending_responses()


def test_the_send_signal_example_puts_a_longstep_signal_event_on_the_signal_bus():
    from longstep.humans.api import SIGNAL_DETAIL_TYPE
    from longstep_kit.constructs.signal_bus import SIGNAL_SOURCE

    example = load_example("examples/runs/send_signal.py")
    events = boto3.client("events", region_name="us-east-1")
    entry = {
        "EventBusName": "signals-bus",
        "Source": SIGNAL_SOURCE,  # what the rule matches, with the detail-type
        "DetailType": SIGNAL_DETAIL_TYPE,
        "Detail": '{"run_id": "triage-001", "event": "ci_finished", "payload": {"status": "green"}}',
    }
    with Stubber(events) as stub:
        stub.add_response("put_events", {"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}, {"Entries": [entry]})
        assert example.send_signal("signals-bus", "triage-001", "ci_finished", {"status": "green"}, events=events) == "e-1"
        stub.assert_no_pending_responses()
