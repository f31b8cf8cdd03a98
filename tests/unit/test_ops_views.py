"""The pure parts of ``longstep_kit.ops.views``: ages, run ids, item sizes, history parsing, prices and
the cost formula."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.ops.views import InspectError
from longstep_kit.ops.views.cost import estimate_cost, load_prices
from longstep_kit.ops.views.history import attempts_of, run_id_of
from longstep_kit.ops.views.records import item_bytes
from longstep_kit.ops.views.status import parse_age
from longstep_kit.ops.views.usage import Usage

PRICES = Path(__file__).resolve().parents[2] / "infra" / "prices.json"


@pytest.fixture(scope="module")
def prices():
    return load_prices(PRICES.read_text())


# -- ages and names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0s", 0),
        ("45s", 45),
        ("30m", 1800),
        ("2h", 7200),
        ("3d", 259_200),
        ("1w", 604_800),
        ("1h30m", 5400),
        ("90", 90),
        ("1.5h", 5400),
        (" 2H ", 7200),
    ],
)
def test_parse_age(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "2x", "two hours", "2h-", "-2h", "2 h"])
def test_parse_age_rejects_what_is_not_an_age(text):
    with pytest.raises(InspectError, match="not an age"):
        parse_age(text)


@pytest.mark.parametrize(("name", "run_id"), [("triage-001", "triage-001"), ("triage-001--g1", "triage-001"), ("a--g12", "a"), ("a--gx", "a--gx")])
def test_run_id_of_an_execution_drops_the_generation(name, run_id):
    assert run_id_of(name) == run_id


def test_item_bytes_counts_names_and_values():
    item = {"pk": {"S": "run-1"}, "sk": {"S": "é"}, "n": {"N": "1234"}, "b": {"B": b"\x00" * 10}, "ok": {"BOOL": True}}
    # names 2+2+1+1+2, values 5 + 2 (UTF-8) + 3 (4 digits) + 10 + 1
    assert item_bytes(item) == 8 + 5 + 2 + 3 + 10 + 1


# -- history parsing --------------------------------------------------------------------------

T0 = dt.datetime(2025, 1, 31, 12, 0, 0, tzinfo=dt.timezone.utc)
TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAc3secret-task-token"


def _event(eid, prev, kind, seconds, **details):
    return {"id": eid, "previousEventId": prev, "type": kind, "timestamp": T0 + dt.timedelta(seconds=seconds), **details}


def _history():
    """CallTool failed once (crash) then succeeded; then a RequestApproval waited 60 s."""
    item = {"run_id": "r", "turn": 2, "call": 1, "tool": "send_email", "approval": True, "wait": "none"}
    return [
        _event(1, 0, "ExecutionStarted", 0),
        _event(2, 1, "TaskStateEntered", 0, stateEnteredEventDetails={"name": "CallTool", "input": json.dumps(item)}),
        _event(3, 2, "LambdaFunctionScheduled", 0, lambdaFunctionScheduledEventDetails={"resource": "arn:fn:CallTool", "input": json.dumps(item)}),
        _event(4, 3, "LambdaFunctionStarted", 0.5),
        _event(5, 4, "LambdaFunctionFailed", 0.7, lambdaFunctionFailedEventDetails={"error": "Runtime.ExitError", "cause": "crash"}),
        _event(6, 5, "LambdaFunctionScheduled", 2.0, lambdaFunctionScheduledEventDetails={"resource": "arn:fn:CallTool", "input": json.dumps(item)}),
        _event(7, 6, "LambdaFunctionStarted", 2.0),
        _event(8, 7, "LambdaFunctionSucceeded", 2.25, lambdaFunctionSucceededEventDetails={"output": "{}"}),
        _event(9, 8, "TaskStateExited", 2.25),
        _event(10, 9, "TaskStateEntered", 3.0, stateEnteredEventDetails={"name": "RequestApproval", "input": json.dumps(item)}),
        _event(
            11,
            10,
            "TaskScheduled",
            3.0,
            taskScheduledEventDetails={
                "resourceType": "lambda",
                "resource": "invoke.waitForTaskToken",
                "parameters": json.dumps({"FunctionName": "arn:fn:RequestApproval", "Payload": {"item": item, "token": TOKEN}}),
            },
        ),
        _event(12, 11, "TaskStarted", 3.0),
        _event(13, 12, "TaskSubmitted", 3.1),
        _event(14, 13, "TaskSucceeded", 63.1),
    ]


def test_attempts_of_a_history_time_each_invocation_and_find_its_step():
    crashed, retried, approval = attempts_of(_history(), "r")
    assert (crashed.state, crashed.turn, crashed.call, crashed.ok, crashed.error) == ("CallTool", 2, 1, False, "Runtime.ExitError")
    assert crashed.seconds == pytest.approx(0.2)
    assert crashed.entry == retried.entry == 2  # one state entry: the second attempt is a retry
    assert retried.ok and retried.seconds == pytest.approx(0.25)
    assert (approval.state, approval.function, approval.ok) == ("RequestApproval", "arn:fn:RequestApproval", True)
    assert approval.seconds == pytest.approx(0.1)  # the Lambda ran until TaskSubmitted...
    assert approval.waited == pytest.approx(60.0) and not approval.open_wait  # ...then the token waited


def test_an_unanswered_task_token_is_an_open_wait():
    *_, approval = attempts_of(_history()[:-1], "r")
    assert approval.open_wait and approval.waited is None and approval.seconds == pytest.approx(0.1)


def test_attempts_never_keep_the_task_token():
    assert TOKEN not in repr(attempts_of(_history(), "r"))


# -- prices and the formula -------------------------------------------------------------------


def test_the_shipped_price_table_loads(prices):
    assert prices.region == "us-east-1" and prices.as_of
    assert prices.default_model is None  # the stack's default model, from one source
    assert prices.step_functions.per_1000_state_transitions > 0 and prices.lambda_.per_gb_second > 0


def test_a_bad_price_table_names_the_field():
    doc = json.loads(PRICES.read_text())
    doc["lambda"]["per_gb_second"] = -1
    with pytest.raises(InspectError, match=r"lambda\.per_gb_second"):
        load_prices(json.dumps(doc))


def test_model_prices_by_id_profile_or_default(prices):
    assert prices.model("anthropic.claude-3-haiku-20240307-v1:0")[0] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert prices.model("us.anthropic.claude-3-haiku-20240307-v1:0")[0] == "anthropic.claude-3-haiku-20240307-v1:0"
    # The default is a geographic profile: priced as itself, its model's entry plus the premium.
    assert prices.model("scripted")[0] == DEFAULT_MODEL_ID
    assert prices.model(None)[0] == DEFAULT_MODEL_ID
    named = prices.model_copy(update={"default_model": "amazon.nova-lite-v1:0"})
    assert named.model("scripted")[0] == "amazon.nova-lite-v1:0"
    with pytest.raises(InspectError, match="default_model 'nope' is not in models"):
        prices.model_copy(update={"default_model": "nope"}).model(None)


USAGE = Usage(
    state_transitions=50,
    retries=2,
    lambda_invocations=25,
    lambda_seconds=4.0,
    lambda_gb_seconds=2.0,
    dynamodb_write_units=60,
    dynamodb_read_units=80,
    s3_puts=1,
    s3_gets=3,
    input_tokens=10_000,
    output_tokens=1_000,
    model_id="anthropic.claude-3-haiku-20240307-v1:0",
    dynamodb_bytes=2 * 1024**3,
    s3_bytes=1024**3,
)


def test_cost_is_the_documented_formula(prices):
    est = estimate_cost(USAGE, prices)
    model = prices.models["anthropic.claude-3-haiku-20240307-v1:0"]
    infra = (
        52 * prices.step_functions.per_1000_state_transitions / 1000  # transitions + retries
        + 2.0 * prices.lambda_.per_gb_second
        + 25 * prices.lambda_.per_million_requests / 1e6
        + 60 * prices.dynamodb.per_million_write_request_units / 1e6
        + 80 * prices.dynamodb.per_million_read_request_units / 1e6
        + 1 * prices.s3.per_1000_put_requests / 1000
        + 3 * prices.s3.per_1000_get_requests / 1000
    )
    tokens = 10_000 * model.per_million_input_tokens / 1e6 + 1_000 * model.per_million_output_tokens / 1e6
    assert est.infrastructure == pytest.approx(infra)
    assert est.total == pytest.approx(infra + tokens)
    assert est.total == pytest.approx(sum(line.dollars for line in est.lines))
    assert est.storage_per_month == pytest.approx(2 * prices.dynamodb.per_gb_month + prices.s3.per_gb_month)
    assert est.model == "anthropic.claude-3-haiku-20240307-v1:0"


def test_each_line_is_quantity_times_unit_price(prices):
    for line in estimate_cost(USAGE, prices).lines:
        assert line.dollars == pytest.approx(line.quantity * line.unit_price)


def test_infrastructure_only_leaves_the_tokens_out(prices):
    est = estimate_cost(USAGE, prices, include_model=False)
    assert not any(line.item.startswith("model") for line in est.lines)
    assert est.total == pytest.approx(est.infrastructure) == pytest.approx(estimate_cost(USAGE, prices).infrastructure)


def test_nothing_used_costs_nothing(prices):
    est = estimate_cost(Usage(), prices)
    assert est.total == 0 and est.storage_per_month == 0


def test_prices_scale_the_cost(prices):
    doubled = prices.model_copy(update={"step_functions": prices.step_functions.model_copy(update={"per_1000_state_transitions": 0.05})})
    delta = estimate_cost(USAGE, doubled).total - estimate_cost(USAGE, prices).total
    assert delta == pytest.approx(52 * 0.025 / 1000)
