"""The execution alarms see the runs, which start on the alias ``live``: each sums the metric under
the unqualified state machine ARN and under the alias ARN (``constructs/observability.py``)."""

from __future__ import annotations

import json

from tests.infra.conftest import resources_of_type


def test_the_execution_alarms_watch_the_alias_too(template):
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    by_metric = {}
    for alarm in alarms.values():
        for query in alarm["Properties"].get("Metrics", []):
            stat = query.get("MetricStat")
            if stat and stat["Metric"]["Namespace"] == "AWS/States":
                by_metric.setdefault(stat["Metric"]["MetricName"], []).append((query["Id"], stat["Metric"]["Dimensions"]))
    for name in ("ExecutionsFailed", "ExecutionsTimedOut"):
        queries = {query_id.rsplit("_", 1)[-1]: dims for query_id, dims in by_metric[name]}
        assert set(queries) == {"unqualified", "alias"}, by_metric
        (alias_dimension,) = queries["alias"]
        assert alias_dimension["Name"] == "StateMachineArn"
        assert json.dumps(alias_dimension["Value"]).endswith(':live"]]}'), alias_dimension  # the state machine's ARN + ":live"
        (plain,) = queries["unqualified"]
        assert "Fn::Join" not in json.dumps(plain["Value"])  # the unqualified ARN: a Ref
