"""Query runs through the runs index (``longstep.runs_index``): ``longstep runs --where``.

A query reads the partitions of the checkpoint table's ``runs_by_facet`` index that its most
selective clause names (a parent, a tag, a tenant, an agent, else the statuses), newest first, with
the ``age`` clauses as a key condition; the index records of facet hits are read back with
GetItem (strongly consistent), and every clause is checked on them. So a query costs read
units for the runs of its partitions, never a scan of the table or a listing of every execution.

Runs whose index record is open (``running``, ``escalated``) are checked against their latest
execution (one DescribeExecution each) and settled when it has failed, timed out or been aborted
without a task seeing it; a query for failed runs reads the open partitions for that reason. An
open run's status is then told from its records (``open_status``: ``paused``,
``waiting_for_approval``...), so ``--where status=...`` says what ``runs`` and ``show`` say.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from botocore.exceptions import ClientError

from longstep import clock, codec, keys, runs_index
from longstep.executions import generation_name
from longstep.store import CheckpointStore
from longstep_kit.ops.fleet_where import Clause, WhereError, matches, parse_where

# The facet a query reads, most selective first.
FACET_ORDER = ("parent", "tag", "tenant", "agent", "status")
DEFAULT_PAGE = 100


@dataclass
class Page:
    """One page of a query.

    Attributes:
        runs: the runs' index records (plain values; ``tags`` a list), newest first per partition.
        cursor: pass it back for the next page; None when there is none.
        read_items: index items the page read (its DynamoDB cost, with the settled runs').
        settled: runs whose record this page settled from their execution.
    """

    runs: list[dict[str, Any]]
    cursor: str | None
    read_items: int = 0
    settled: list[str] = field(default_factory=list)


@dataclass
class RunsQuery:
    """Queries of one deployment's runs index.

    Args:
        dynamodb: a DynamoDB client.
        table: the checkpoint table.
        sfn: a Step Functions client (settles open runs; None: records are shown as written).
        state_machine_arn: the agent state machine (to name a run's executions).
        cost_of: a run's dollar cost from its index record (the ``cost`` field; 0 when None).
        open_status: the status of a run whose latest execution runs (``paused``, a wait...:
            ``longstep.run_status``), read from its records, since the index records only
            ``running`` and ``escalated`` for it (None: the index's status is shown).
    """

    dynamodb: Any
    table: str
    sfn: Any = None
    state_machine_arn: str | None = None
    cost_of: Callable[[dict[str, Any]], float] | None = None
    open_status: Callable[[str], str] | None = None

    def page(self, where: str, *, limit: int = DEFAULT_PAGE, cursor: str | None = None, now: float | None = None) -> Page:
        """Up to ``limit`` runs matching ``where``, from ``cursor`` on.

        Raises:
            WhereError: the expression is malformed, or the cursor is not one this query gave.
        """
        clauses = parse_where(where)
        now = clock.now() if now is None else now
        plan = partitions(clauses)
        start = _decode_cursor(cursor, len(plan)) if cursor else (0, None)
        out: list[dict[str, Any]] = []
        page = Page(runs=out, cursor=None)
        cost_of = self.cost_of or (lambda run: 0.0)
        seen: set[str] = set()  # the index is eventually consistent: a run moving between partitions may show twice
        for index, position, run in self._walk(plan, clauses, now, start, page):
            if run is not None and run["run_id"] not in seen and matches(clauses, run, now, cost_of):
                seen.add(run["run_id"])
                out.append(run)
                if len(out) >= limit:
                    page.cursor = _encode_cursor(index, position)
                    return page
        return page

    def select(self, where: str, *, now: float | None = None) -> list[dict[str, Any]]:
        """Every run matching ``where`` (every page)."""
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.page(where, cursor=cursor, now=now)
            found += page.runs
            if page.cursor is None:
                return found
            cursor = page.cursor

    # reading the index ------------------------------------------------------------------------

    def _walk(
        self, plan: list[str], clauses: list[Clause], now: float, start: tuple[int, dict[str, Any] | None], page: Page
    ) -> Iterator[tuple[int, dict[str, Any], dict[str, Any] | None]]:
        first, after = start
        bounds = _order_bounds(clauses, now)
        for index in range(first, len(plan)):
            for position, item in self._query(plan[index], bounds, after if index == first else None):
                page.read_items += 1
                run = item if item.get("sk") == keys.RUN_INDEX_RECORD else None
                if run is None:
                    run = self._index_record(str(item["pk"]))
                if run is not None:
                    run = self._settled(_decoded(run), page)
                if run is not None and self.open_status is not None and run.get("status") in runs_index.OPEN_STATUSES:
                    run = {**run, "status": self.open_status(str(run["run_id"]))}
                yield index, position, run

    def _query(
        self, facet: str, bounds: tuple[str | None, str | None], after: dict[str, Any] | None
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        names = {"#f": keys.RUNS_FACET_ATTRIBUTE}
        values: dict[str, Any] = {":f": {"S": facet}}
        condition = "#f = :f"
        low, high = bounds
        if low is not None or high is not None:  # DynamoDB refuses a name no expression uses
            names["#o"] = keys.RUNS_ORDER_ATTRIBUTE
        if low is not None and high is not None:
            condition += " AND #o BETWEEN :low AND :high"
            values.update({":low": {"S": low}, ":high": {"S": high}})
        elif low is not None:
            condition += " AND #o >= :low"
            values[":low"] = {"S": low}
        elif high is not None:
            condition += " AND #o <= :high"
            values[":high"] = {"S": high}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": keys.RUNS_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,  # newest first
        }
        if after:
            kwargs["ExclusiveStartKey"] = {name: {"S": str(value)} for name, value in after.items()}
        while True:
            resp = self.dynamodb.query(**kwargs)
            for raw in resp.get("Items", []):
                item = codec.plain(raw)
                position = {name: item[name] for name in ("pk", "sk", keys.RUNS_FACET_ATTRIBUTE, keys.RUNS_ORDER_ATTRIBUTE)}
                yield position, item
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def _index_record(self, run_id: str) -> dict[str, Any] | None:
        return CheckpointStore(self.table, self.dynamodb).get(run_id, keys.RUN_INDEX_RECORD)

    def _settled(self, run: dict[str, Any], page: Page) -> dict[str, Any]:
        """The run as its latest execution says, when its record is open and that execution ended."""
        if self.sfn is None or self.state_machine_arn is None or run.get("status") not in runs_index.OPEN_STATUSES:
            return run
        arn = execution_arn(self.state_machine_arn, generation_name(run["run_id"], int(run.get("generation") or 0)))
        try:
            desc = self.sfn.describe_execution(executionArn=arn)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
                return run
            raise
        store = CheckpointStore(self.table, self.dynamodb)
        status = runs_index.settle(store, run["run_id"], run, desc["status"], desc.get("error"))
        if status is None:
            return run
        page.settled.append(run["run_id"])
        settled = {**run, "status": status, "failure": desc.get("error")}
        if desc.get("error") and not run.get("error"):
            settled["error"] = desc.get("error")
        return settled


def partitions(clauses: list[Clause]) -> list[str]:
    """The ``ix_facet`` partitions a query reads, in order: those of its most selective clause."""
    for name in FACET_ORDER:
        for clause in clauses:
            if clause.field == name and clause.op in ("=", "in"):
                if name != "status":
                    return [keys.run_facet(name, str(v)) for v in clause.values]
                # A status the index does not record (paused, a wait) is filed under an open one.
                wanted = list(dict.fromkeys(v if v in runs_index.STATUSES else runs_index.RUNNING for v in clause.values))
                if set(wanted) - set(runs_index.OPEN_STATUSES):  # an ended run may still be filed as open
                    wanted += [s for s in runs_index.OPEN_STATUSES if s not in wanted]
                return [keys.run_facet("status", s) for s in wanted]
    return [keys.run_facet("status", s) for s in runs_index.STATUSES]


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of the execution ``name`` of a state machine (or of one of its versions or aliases)."""
    parts = state_machine_arn.split(":")
    # arn:aws:states:REGION:ACCOUNT:stateMachine:NAME[:VERSION|ALIAS]
    return ":".join([*parts[:5], "execution", parts[6], name])


def _order_bounds(clauses: list[Clause], now: float) -> tuple[str | None, str | None]:
    """``ix_order`` bounds from the ``age`` clauses (age is now minus creation)."""
    low, high = None, None
    for clause in clauses:
        if clause.field != "age" or clause.op not in ("<", "<=", ">", ">="):
            continue
        edge = now - float(clause.value)
        if clause.op in ("<", "<="):  # created after the edge
            low = max(low or "", keys.run_order(edge, ""))
        else:
            bound = keys.run_order(edge, "~")
            high = bound if high is None else min(high, bound)
    return low, high


def _decoded(run: dict[str, Any]) -> dict[str, Any]:
    tags = run.get("tags")
    return {**run, "tags": json.loads(tags) if isinstance(tags, str) else list(tags or [])}


def _encode_cursor(index: int, position: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps({"p": index, "k": position}, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str, partitions_count: int) -> tuple[int, dict[str, Any]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        index, position = int(data["p"]), dict(data["k"])
    except (ValueError, KeyError, TypeError):
        raise WhereError("cursor: not a cursor `longstep runs` printed") from None
    if not 0 <= index < partitions_count or set(position) != {"pk", "sk", keys.RUNS_FACET_ATTRIBUTE, keys.RUNS_ORDER_ATTRIBUTE}:
        raise WhereError("cursor: not a cursor of this query (give the same --where as the page it came from)")
    return index, position
