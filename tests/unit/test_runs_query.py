"""The ``--where`` grammar (one-line errors naming the bad field), its matching, the partitions a
query reads, the runs index records the runtime writes, and the bulk operations' token bucket."""

from __future__ import annotations

import pytest

from longstep import keys, runs_index
from longstep.errors import InvalidInputError
from longstep.inmemory import InMemoryStore
from longstep.inputs import StartInput, parse_model
from longstep_kit.ops.bulk import TokenBucket, _ineligible
from longstep_kit.ops.fleet_query import _order_bounds, execution_arn, partitions
from longstep_kit.ops.fleet_where import WhereError, matches, parse_where

RUN = {
    "run_id": "r1",
    "agent": "triage",
    "status": "failed",
    "tenant": "acme",
    "tags": ["eu", "batch-7"],
    "code_version": "3f2a9c00aa11bb22",
    "error": "ToolFailedError",
    "parent": "lead-1",
    "created_at": 1000.0,
    "input_tokens": 1000,
    "output_tokens": 500,
}


def _match(where: str, run=RUN, now: float = 9000.0) -> bool:  # the run is 2h13m old
    return matches(parse_where(where), run, now, cost_of=lambda r: 4.8)


@pytest.mark.parametrize(
    "where",
    [
        "status=failed",
        "STATUS = FAILED and tenant = acme",
        "tenant in (acme, globex) AND tag=eu",
        "code_version=3f2a9c",
        "error='ToolFailedError' AND parent=\"lead-1\"",
        "age>2h AND age<3h",
        "tokens>=1500 AND cost>4.5 AND cost<=$5",
        "tag!=us AND agent!=other",
    ],
)
def test_expressions_that_hold(where):
    assert _match(where)


@pytest.mark.parametrize(
    "where",
    ["status=running", "tenant in (globex, initech)", "tag=us", "code_version=3f2a9d", "age<1h", "tokens<1500", "cost>5", "tenant!=acme"],
)
def test_expressions_that_do_not(where):
    assert not _match(where)


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("tenat=acme", "unknown field 'tenat'"),
        ("status=broken", "status: 'broken' is not one of"),
        ("age>soon", "age: 'soon' is not an age"),
        ("cost>cheap", "cost: 'cheap' is not a number"),
        ("tenant<acme", "tenant: only = != and in"),
        ("code_version=3f2", "code_version: give at least 6"),
        ("status=failed OR tenant=acme", "expected AND after status"),
        ("tenant in acme", "tenant: expected ( after in"),
        ("tenant=", "tenant: expected a value"),
        ("", "the expression is empty"),
        ("tenant=acme;drop", "unexpected ';drop'"),
    ],
)
def test_a_bad_expression_is_one_line_naming_what_is_wrong(where, named):
    with pytest.raises(WhereError) as caught:
        parse_where(where)
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_the_most_selective_clause_picks_the_partitions():
    assert partitions(parse_where("status=failed AND tenant=acme")) == [keys.run_facet("tenant", "acme")]
    assert partitions(parse_where("tag in (a, b) AND tenant=acme")) == [keys.run_facet("tag", "a"), keys.run_facet("tag", "b")]
    # An ended run may still be filed as open until a query settles it: those partitions are read too.
    assert partitions(parse_where("status=failed")) == [keys.run_facet("status", s) for s in ("failed", *runs_index.OPEN_STATUSES)]
    assert partitions(parse_where("age<1d")) == [keys.run_facet("status", s) for s in runs_index.STATUSES]


def test_age_clauses_bound_the_sort_key():
    low, high = _order_bounds(parse_where("age>1h AND age<2h"), now=10_000.0)
    assert low == keys.run_order(10_000.0 - 7200, "") and high == keys.run_order(10_000.0 - 3600, "~")
    assert low < keys.run_order(5000.0, "r") < high
    assert _order_bounds(parse_where("status=failed"), now=1.0) == (None, None)


def test_execution_arns_are_named_from_the_state_machine():
    arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:Agent"
    assert execution_arn(arn, "r1--g2") == "arn:aws:states:eu-west-1:123456789012:execution:Agent:r1--g2"
    assert execution_arn(arn + ":live", "r1") == "arn:aws:states:eu-west-1:123456789012:execution:Agent:r1"


def test_tenant_and_tags_are_validated_at_the_start():
    base = {"run_id": "r1", "goal": "g", "agent": "a"}
    assert parse_model(StartInput, {**base, "tenant": "acme", "tags": ["eu", "batch-7"]}, "start input").tags == ["eu", "batch-7"]
    for bad, field in (({"tenant": "ac#me"}, "tenant"), ({"tags": ["eu", "eu"]}, "tags"), ({"tags": ["x"] * 11}, "tags"), ({"tenant": ""}, "tenant")):
        with pytest.raises(InvalidInputError) as caught:
            parse_model(StartInput, {**base, **bad}, "start input")
        assert field in str(caught.value)


def test_the_index_records_of_a_run_move_between_status_partitions():
    store = InMemoryStore("t")
    run = {"agent": "triage", "tenant": "acme", "tags": '["eu"]', "created_at": 5.0, "code_version": "v1", "model": {"provider": "scripted"}}
    runs_index.on_start(store, "r1", run, generation=0, resumed=False)
    facets = {r["sk"]: r[keys.RUNS_FACET_ATTRIBUTE] for r in store.query_prefix("r1", keys.RUN_INDEX_RECORD)}
    assert facets == {"index": "status#running", "index#agent": "agent#triage", "index#tenant": "tenant#acme", "index#tag#eu": "tag#eu"}
    assert runs_index.on_status(store, "r1", runs_index.ESCALATED, error="ToolFailedError", counts={"input_tokens": 10})
    record = store.get("r1", keys.RUN_INDEX_RECORD)
    assert (record["status"], record["error"], record[keys.RUNS_FACET_ATTRIBUTE]) == ("escalated", "ToolFailedError", "status#escalated")
    # A settle that read an older record writes nothing; one that read this one files it as failed.
    assert runs_index.settle(store, "r1", {"status": "running", "generation": 0}, "FAILED", "EscalationTimedOut") is None
    assert runs_index.settle(store, "r1", record, "FAILED", "EscalationTimedOut") == runs_index.FAILED
    record = store.get("r1", keys.RUN_INDEX_RECORD)
    assert (record["status"], record["error"], record["failure"]) == ("failed", "ToolFailedError", "EscalationTimedOut")
    runs_index.on_start(store, "r1", run, generation=1, resumed=True)  # a redrive's new execution
    record = store.get("r1", keys.RUN_INDEX_RECORD)
    assert (record["status"], record["generation"], record["input_tokens"], "error" in record) == ("running", 1, 10, False)
    assert not runs_index.on_status(store, "r2", runs_index.FAILED)  # a run from before the index: nothing written
    assert store.get("r2", keys.RUN_INDEX_RECORD) is None


def test_the_token_bucket_holds_a_burst_then_the_rate():
    clock = {"t": 0.0}
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock["t"] += seconds

    bucket = TokenBucket(rate=2.0, burst=3, now=lambda: clock["t"], sleep=sleep)
    for _ in range(7):
        bucket.take()
    assert sleeps == [0.5, 0.5, 0.5, 0.5]  # three at once, then one every half second
    clock["t"] += 10  # idle: the bucket refills to its burst, no more
    for _ in range(3):
        bucket.take()
    assert len(sleeps) == 4
    bucket.take()
    assert sleeps[-1] == pytest.approx(0.5)


def test_which_runs_each_verb_takes():
    assert _ineligible("redrive", "failed") is None and _ineligible("redrive", "aborted") is None
    assert "only failed" in _ineligible("redrive", "succeeded")
    assert _ineligible("stop", "running") is None and "nothing to stop" in _ineligible("stop", "succeeded")
    assert _ineligible("resume", "stopped") is None and "only failed, stopped" in _ineligible("resume", "running")


def test_a_bad_where_is_refused_before_any_request(capsys):
    from longstep_kit.cli import main

    # Port 1 answers nothing: reaching for it would end in "cannot reach" (exit 3), not a usage error.
    assert main(["runs", "--where", "tenat=acme", "--endpoint-url", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: where: unknown field 'tenat'") and "cannot reach" not in err
