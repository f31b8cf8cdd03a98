"""The CLI's "now" and a run's execution order, without a stack: against an endpoint that serves no
clock the CLI keeps this machine's time, against AWS nothing changes, and a run's executions are
ordered by generation even when their start dates tie or go back (the virtual clock)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from longstep import clock
from longstep_kit.cli import aws as aws_module
from longstep_kit.cli.aws import Aws
from longstep_kit.local.serve import free_port
from longstep_kit.ops.runs import generation_of, latest_execution, run_executions


def test_a_local_endpoint_with_no_clock_route_leaves_the_machines_time(monkeypatch):
    monkeypatch.setattr(aws_module.time, "time", lambda: 123.0)
    local = Aws(endpoint_url=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with clock.use_source(lambda: 5.0), local.served_clock():
        assert clock.now() == 123.0 and clock.now() == 123.0  # asked once, then remembered
    assert local._no_served_clock


def test_against_aws_the_cli_reads_its_own_clock():
    for remote in (Aws(), Aws(endpoint_url="https://states.eu-west-1.amazonaws.com")):
        with clock.use_source(lambda: 5.0), remote.served_clock():
            assert clock.now() == 5.0


class _Listing:
    def __init__(self, executions: list[dict[str, Any]]) -> None:
        self.executions = executions

    def list_executions(self, **_: Any) -> dict[str, Any]:
        return {"executions": self.executions}


def test_a_runs_executions_are_ordered_by_generation_not_by_start_date_alone():
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    later = at + dt.timedelta(days=2)
    # Newest first, as ListExecutions answers; g1 and g2 started at one virtual instant, g3 on a rewound clock.
    listed = [
        {"name": "r--g3", "startDate": at},
        {"name": "r--g2", "startDate": later},
        {"name": "r--g1", "startDate": later},
        {"name": "other", "startDate": at},
        {"name": "r", "startDate": at},
        {"name": "r--gx", "startDate": at},  # not a generation name: a run of its own
    ]
    ordered = [e["name"] for e in run_executions(_Listing(listed), "arn", "r")]
    assert ordered == ["r", "r--g1", "r--g2", "r--g3"]
    assert latest_execution(_Listing(listed), "arn", "r")["name"] == "r--g3"
    assert [generation_of(n) for n in ("r", "r--g1", "r--g12", "r--gx")] == [0, 1, 12, 0]
