"""Fleets: ``runs --where`` (the runs index), ``bulk stop|resume|redrive|signal --where`` and
``audit``. The query and the operations live in ``longstep_kit.ops.fleet_query`` and
``longstep_kit.ops.bulk``; this module parses, prints and wires the clients."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from longstep import clock
from longstep_kit.cli.errors import EXIT_OK, CliError
from longstep_kit.cli.formatting import table
from longstep_kit.cli.targets import add_stack_options, checkpoint_store, stack_output, targets

PRICES_FILE = Path(__file__).resolve().parent.parent / "prices.json"


# -- runs --where -----------------------------------------------------------------------------


def add_where_options(p: argparse.ArgumentParser) -> None:
    """``--where``, ``--limit`` and ``--cursor`` on ``longstep runs``."""
    p.add_argument(
        "--where", metavar="EXPR", help='select runs through the runs index, e.g. "status=failed AND tenant=acme AND age<1d" (docs/fleet.md)'
    )
    p.add_argument("--limit", type=_positive, default=100, help="runs per page with --where (default 100)")
    p.add_argument("--cursor", help="the next page: the cursor the previous page printed")


def cmd_runs_where(args: argparse.Namespace) -> int:
    if not args.where:
        raise CliError("--cursor: goes with the --where of the page it came from")
    if getattr(args, "status", None):
        raise CliError(f'--status: with --where, say it in the expression (--where "status={args.status} AND ...")')
    from longstep_kit.ops.fleet_where import parse_where

    parse_where(args.where)  # a mistake in the expression is said before any request
    query = runs_query(args)
    now = clock.now()
    page = query.page(args.where, limit=args.limit, cursor=args.cursor, now=now)
    if args.output == "json" or getattr(args, "json", False):
        from longstep_kit.cli.structured import print_data

        shown = [_shown(r, query, now) for r in page.runs]
        whole = {"runs": shown, "count": len(page.runs), "next_cursor": page.cursor}
        # A table of the page's runs (the list), unless a --query picks from the whole answer.
        print_data(args, shown if args.output == "table" and not args.query else whole)
        return EXIT_OK
    if not page.runs:
        print(f"no runs where {args.where}")
        return EXIT_OK
    rows = [
        [
            r["run_id"],
            r.get("status", ""),
            r.get("agent", ""),
            r.get("tenant") or "-",
            ",".join(r.get("tags") or []) or "-",
            _age(now, r),
            r.get("error") or "",
        ]
        for r in page.runs
    ]
    for line in table(["RUN", "STATUS", "AGENT", "TENANT", "TAGS", "AGE", "ERROR"], rows):
        print(line)
    print(f"\n{len(page.runs)} run{'s' if len(page.runs) != 1 else ''} where {args.where}")
    if page.cursor:
        print(f"more: --cursor {page.cursor}")
    return EXIT_OK


def runs_query(args: argparse.Namespace) -> Any:
    from longstep_kit.ops.fleet_query import RunsQuery

    from longstep_kit.cli.targets import inspector_of

    arn, table_name = targets(args)
    inspector = inspector_of(args)

    def open_status(run_id: str) -> str:  # an open run's status as `runs` and `show` tell it
        return str(inspector.open_state(run_id)[0])

    dynamodb, sfn = args.aws.client("dynamodb"), args.aws.client("stepfunctions")
    return RunsQuery(dynamodb, table_name, sfn, arn, cost_of=price_of_run(PRICES_FILE), open_status=open_status)


def price_of_run(path: Path) -> Any:
    """A run's model cost in dollars from its index record's tokens, under the price table at ``path``."""
    from longstep_kit.ops.views.cost import load_prices

    prices = load_prices(path.read_text())

    def cost(run: dict[str, Any]) -> float:
        _, model = prices.model(run.get("model_id"))
        tokens_in, tokens_out = float(run.get("input_tokens") or 0), float(run.get("output_tokens") or 0)
        return (tokens_in * model.per_million_input_tokens + tokens_out * model.per_million_output_tokens) / 1_000_000

    return cost


def _shown(run: dict[str, Any], query: Any, now: float) -> dict[str, Any]:
    hidden = {"pk", "sk", "ix_facet", "ix_order", "expires_at", "kept_until", "schema_version", "v"}
    shown = {k: v for k, v in run.items() if k not in hidden}
    shown["age_seconds"] = round(now - float(run.get("created_at") or now), 3)
    shown["cost_usd"] = round(query.cost_of(run), 6) if query.cost_of else None
    return shown


def _age(now: float, run: dict[str, Any]) -> str:
    seconds = int(now - float(run.get("created_at") or now))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# -- bulk -------------------------------------------------------------------------------------


def cmd_bulk(args: argparse.Namespace) -> int:
    runner = bulk_runner(args)
    if args.verb == "continue":
        if not args.operation:
            raise CliError("operation: continue needs the operation id", hint="list the operations with `longstep audit`")
        counts = runner.resume_operation(args.operation)
        return _print_counts(args, args.operation, counts)
    if not args.where:
        raise CliError('--where: a bulk operation needs a selection, e.g. --where "status=failed AND tenant=acme"')
    selection = runner.plan(args.verb, args.where)
    if args.dry_run:
        return _print_selection(args, selection)
    options: dict[str, Any] = {"force": bool(args.force), "reason": args.reason}
    if args.verb == "signal":
        from longstep.json_input import parse_json

        options.update(event=args.event, payload=parse_json(args.payload, "--payload") if args.payload else {})
    op_id = runner.run(args.verb, args.where, options)
    op = runner.audit.operation(op_id)
    return _print_counts(args, op_id, op.get("counts") or {})


def bulk_runner(args: argparse.Namespace) -> Any:
    from longstep_kit.cli.targets import steering_of
    from longstep_kit.ops.bulk import BulkRunner, TokenBucket

    arn, table_name = targets(args)
    store = checkpoint_store(args, table_name)
    steering = steering_of(args)
    return BulkRunner(
        store,
        args.aws.client("stepfunctions"),
        arn,
        runs_query(args),
        who=steering.who,
        bucket=TokenBucket(rate=args.rate, burst=max(1, int(args.rate))),
        replay_gate=_replay_gate(args, store),
        send_signal=_signaller(args, store),
        # The index said the run is open; the stop also wakes what it is parked on, and its children.
        stop_run=steering._stop_tree,
    )


def _replay_gate(args: argparse.Namespace, store: Any) -> Any:
    from longstep.artifacts import ArtifactStore
    from longstep_kit.ops.export import export_run
    from longstep_kit.ops.replay import replay_export
    from longstep_kit.project import agent_catalog

    def gate(run_id: str) -> list[str]:
        artifacts = ArtifactStore(stack_output(args, "ArtifactBucketName"), args.aws.client("s3"))
        report = replay_export(export_run(store, artifacts, run_id), agent_catalog(), unfinished=True)
        return list(report.divergences)

    return gate


def _signaller(args: argparse.Namespace, store: Any) -> Any:
    from longstep.humans import signals
    from longstep_kit.project import agent_catalog

    def send(run_id: str, event: str, payload: dict[str, Any]) -> str:
        return str(signals.send(store, args.aws.client("stepfunctions"), run_id, event, payload, agent_catalog()))

    return send


def _print_selection(args: argparse.Namespace, selection: Any) -> int:
    eligible = selection.eligible
    if args.output == "json":
        shown = {
            "verb": selection.verb,
            "where": selection.where,
            "count": len(eligible),
            "runs": [r["run_id"] for r in eligible],
            "skipped": selection.skipped,
        }
        print(json.dumps(shown, indent=2))
        return EXIT_OK
    for run in eligible:
        print(f"{run['run_id']}  {run.get('status')}  {run.get('tenant') or '-'}  {run.get('error') or ''}".rstrip())
    for run_id, reason in selection.skipped.items():
        print(f"{run_id}  skipped: {reason}")
    print(f"\ndry run: {selection.verb} would act on {len(eligible)} run{'s' if len(eligible) != 1 else ''} ({len(selection.skipped)} skipped)")
    return EXIT_OK


def _print_counts(args: argparse.Namespace, op_id: str, counts: dict[str, int]) -> int:
    if args.output == "json":
        print(json.dumps({"operation": op_id, "counts": counts}, indent=2))
    else:
        print(f"operation {op_id}: " + (", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "no runs"))
        print(f"each run's outcome: longstep audit {op_id}")
    return EXIT_OK


# -- audit ------------------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace) -> int:
    from longstep_kit.ops.bulk_audit import AuditTrail

    _, table_name = targets(args)
    trail = AuditTrail(checkpoint_store(args, table_name))
    if args.operation:
        op = trail.operation(args.operation)
        runs = trail.runs(op["op_id"])
        if args.output == "json":
            keep = ("run_id", "state", "outcome", "detail", "done_at")
            print(json.dumps({**_op_json(op), "runs": [{k: r.get(k) for k in keep} for r in runs]}, indent=2, default=str))
            return EXIT_OK
        print(f"{op['op_id']}: {op['verb']} where {op['where']} by {op['who']} at {_when(op['created_at'])} ({op['status']})")
        rows = [[r["run_id"], r.get("outcome") or r.get("state", ""), str(r.get("detail") or "")[:80]] for r in runs]
        for line in table(["RUN", "OUTCOME", "DETAIL"], rows):
            print(line)
        return EXIT_OK
    ops = trail.recent(args.aws.client("dynamodb"), args.limit)
    if args.output == "json":
        print(json.dumps([_op_json(o) for o in ops], indent=2, default=str))
        return EXIT_OK
    if not ops:
        print("no bulk operations")
        return EXIT_OK
    rows = [[o["op_id"], o["verb"], o["where"], o["who"], _when(o["created_at"]), o["status"], str(o.get("selected", 0))] for o in ops]
    for line in table(["OPERATION", "VERB", "WHERE", "WHO", "WHEN", "STATUS", "RUNS"], rows):
        print(line)
    return EXIT_OK


def _when(epoch: Any) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(float(epoch), tz=dt.timezone.utc).isoformat(timespec="seconds")


def _op_json(op: dict[str, Any]) -> dict[str, Any]:
    keep = ("op_id", "verb", "where", "who", "created_at", "status", "selected", "counts", "options", "finished_at")
    shown = {k: op.get(k) for k in keep}
    for name in ("counts", "options"):
        if isinstance(shown[name], str):
            shown[name] = json.loads(shown[name])
    return shown


# -- registration -----------------------------------------------------------------------------


def _number(kind: type, what: str, low: float, high: float) -> Any:
    """An argparse type: a ``kind`` number in ``[low, high]`` (a one-line error otherwise)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {what} from {low:g} to {high:g}, got {text}")
        return value

    return parse


_positive = _number(int, "a whole number", 1, 10_000)
# Below 0.01 a run per second a bulk operation would take days; above 100 it would outrun the
# DescribeExecution refill (bulk.py).
_rate = _number(float, "runs per second", 0.01, 100)


def _targets(p: argparse.ArgumentParser) -> None:
    add_stack_options(p)
    p.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")


def register(sub: Any) -> None:
    from longstep_kit.ops.bulk import DEFAULT_RATE, VERBS

    bulk = sub.add_parser(
        "bulk",
        help="stop, resume, redrive or signal the runs a --where selects, at a bounded rate, with an audit record. "
        'Example: longstep bulk redrive --where "status=failed AND code_version=3f2a9c" --dry-run',
    )
    bulk.add_argument("verb", choices=(*VERBS, "continue"), help="the operation; continue: go on with an interrupted one")
    bulk.add_argument("operation", nargs="?", help="with continue: the operation id (longstep audit lists them)")
    bulk.add_argument("--where", metavar="EXPR", help="the runs to act on (docs/fleet.md has the grammar)")
    bulk.add_argument("--dry-run", action="store_true", help="print the selection and its count; do nothing")
    bulk.add_argument("--force", action="store_true", help="redrive: also the runs whose replay diverges on the code deployed now")
    bulk.add_argument("--reason", default="stopped by a bulk operation", help="stop: the reason recorded with each stop")
    bulk.add_argument("--event", help="signal: the event name")
    bulk.add_argument("--payload", help="signal: the payload (a JSON object)")
    bulk.add_argument(
        "--rate", type=_rate, default=DEFAULT_RATE, help=f"runs per second (default {DEFAULT_RATE:g}: under Step Functions' API quotas)"
    )
    _targets(bulk)
    bulk.set_defaults(func=cmd_bulk)
    audit = sub.add_parser("audit", help="bulk operations: who ran what, when, on which runs, and each run's outcome")
    audit.add_argument("operation", nargs="?", help="one operation's runs and outcomes")
    audit.add_argument("--limit", type=_positive, default=20, help="operations listed (default 20, newest first)")
    _targets(audit)
    audit.set_defaults(func=cmd_audit)
    register_budget(sub)
    from longstep_kit.cli.fleet_limit_cmd import register_fleet

    register_fleet(sub)


# -- budgets ----------------------------------------------------------------------------------


def cmd_budget(args: argparse.Namespace) -> int:
    from longstep import budget

    _, table_name = targets(args)
    store = checkpoint_store(args, table_name)
    if args.action == "tenant":
        if args.usd is not None or args.tokens is not None:
            budget.set_tenant_limit(store, args.target, usd=args.usd, tokens=args.tokens)
        shown: Any = {"tenant": args.target, **budget.tenant_spend(store, args.target)}
    elif args.action == "show":
        shown = {
            "run_id": args.target,
            "asks": [{k: a.get(k) for k in ("sk", "status", "question", "answered_by")} for a in budget.pending_asks(store, args.target)],
        }
    else:
        try:
            answered = budget.answer(store, args.target, allow=args.action == "allow", who=_who(args), decide=_inbox_decider(args, store))
        except LookupError as exc:
            raise CliError(str(exc), hint=f"see its asks: longstep budget show {args.target}") from None
        shown = {"run_id": args.target, "question": answered["question"], "status": answered["status"]}
    if args.output == "json":
        print(json.dumps(shown, indent=2))
    elif args.action in ("allow", "refuse"):
        print(f"run {args.target}: {shown['status']}: {shown['question']}")
    elif args.action == "show":
        print("\n".join(f"{a['sk']}  {a['status']}  {a['question']}" for a in shown["asks"]) or f"run {args.target} has asked for nothing")
    else:
        print(
            f"tenant {args.target}: spent ${shown['usd']:.2f} and {int(shown['tokens']):,} tokens (limits: ${shown['limit_usd']}, {shown['limit_tokens']} tokens)"
        )
    return EXIT_OK


def _inbox_decider(args: argparse.Namespace, store: Any) -> Any:
    """Decides a listed ask as its approval request (the first decision wins, as on the pages);
    None when the stack has no approvals table."""
    from longstep.humans import budget_asks
    from longstep.humans.table import ApprovalTable, Decision

    try:
        table = ApprovalTable(stack_output(args, "ApprovalsTableName"), args.aws.client("dynamodb"))
    except CliError:
        return None
    allow = args.action == "allow"
    decision = Decision(
        decision="approve" if allow else "reject", reason=None if allow else "refused with longstep budget refuse", approver=_who(args)
    )
    return lambda record: budget_asks.decide(table, store, str(record["approval_id"]), decision)


def _who(args: argparse.Namespace) -> str:
    from longstep_kit.cli.targets import _caller

    return _caller(args)


def register_budget(sub: Any) -> None:
    p = sub.add_parser("budget", help="budgets: answer a run's ask for more (allow/refuse), list its asks, or set a tenant's limits")
    p.add_argument(
        "action", choices=("allow", "refuse", "show", "tenant"), help="allow or refuse a run's pending ask; show a run's asks; tenant: its limits"
    )
    p.add_argument("target", help="the run id (allow, refuse, show) or the tenant (tenant)")
    p.add_argument("--usd", type=_number(float, "dollars", 0.01, 1_000_000), help="tenant: its limit in dollars")
    p.add_argument("--tokens", type=_number(int, "tokens", 1, 10**12), help="tenant: its limit in model tokens")
    _targets(p)
    p.set_defaults(func=cmd_budget)
