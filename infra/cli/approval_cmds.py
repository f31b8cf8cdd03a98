"""The humans' commands: decide approvals, answer escalations, send signals.

``approvals``, ``approve``, ``reject``, ``escalations``, ``resolve`` and ``signal`` work on a
deployed stack: table names come from its CloudFormation outputs (``--stack``, or
``--checkpoint-table`` / ``--approvals-table``), and the calls are the ones the approval API's
Lambda makes (``longstep.humans.service.ApprovalService``), under the caller's own AWS credentials;
the caller's identity (STS) is recorded as the approver. Inside a process running the local stack,
moto answers the same calls, so the same commands drive a local run.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from longstep_kit.cli.errors import CliError
from longstep_kit.cli.structured import add_paging, page, print_data
from longstep_kit.cli.where import add_where


def _tables(args: argparse.Namespace) -> tuple[str, str]:
    from longstep_kit.cli.aws_cmds import stack_output

    checkpoints = args.checkpoint_table or stack_output(args, "CheckpointTableName")
    approvals = args.approvals_table or stack_output(args, "ApprovalsTableName")
    return checkpoints, approvals


def _resolve_agent(name: str) -> Any:
    """The agent ``name`` as the project's cdk.json registers it: an edit is checked
    against its tool's schema before anything is written."""
    from longstep_kit.project import agent_catalog

    resolve_agent = agent_catalog()

    return resolve_agent(name)


def _service(args: argparse.Namespace) -> Any:
    from longstep.humans.service import ApprovalService
    from longstep.humans.table import ApprovalTable
    from longstep.store import CheckpointStore

    checkpoints, approvals = _tables(args)
    ddb = args.aws.client("dynamodb")
    return ApprovalService(ApprovalTable(approvals, ddb), CheckpointStore(checkpoints, ddb), args.aws.client("stepfunctions"), _resolve_agent)


def _caller(args: argparse.Namespace) -> str:
    """Who is deciding: the ARN of the AWS credentials in use."""
    return args.aws.client("sts").get_caller_identity()["Arn"]


def _json_arg(text: str, option: str) -> Any:
    from longstep.json_input import parse_json

    return parse_json(text, option)  # a BadRequestError: one line naming the option, exit 2


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


# -- approvals -----------------------------------------------------------------------------------


def _link_minter(args: argparse.Namespace) -> tuple[str | None, Any, str | None]:
    """The approval API's URL and the link key ring (None when this caller cannot read the key),
    and why links cannot be made when they cannot."""
    from longstep import links
    from longstep_kit.cli.aws_cmds import stack_output

    try:
        secret = stack_output(args, "LinkKeySecretArn")
        # A local server's pages stand in for the approval API (`longstep local serve` prints their URL).
        api_url = getattr(args, "pages_url", None) or stack_output(args, "ApprovalApiUrl")
    except CliError as exc:
        return None, None, str(exc)
    try:
        return api_url, links.keyring_from_secret(args.aws.client("secretsmanager"), secret), None
    except Exception as exc:  # noqa: BLE001 - no permission to read the key: list without links
        return api_url, None, f"cannot read the link key ({type(exc).__name__})"


def cmd_approvals(args: argparse.Namespace) -> int:
    from longstep.humans.notifications import decision_link

    requests = page(args, _service(args).list(args.run, args.status))
    api_url, ring, why = _link_minter(args) if requests and args.status == "pending" else (None, None, None)
    for request in requests:
        request["link"] = decision_link(api_url, ring, request, subject=_caller(args)) if ring else None
    if args.json:
        print_data(args, requests)
        return 0
    if not requests:
        print(f"no {args.status} approvals" + (f" for run {args.run}" if args.run else ""))
        return 0
    rows = [
        [r["approval_id"], r["run_id"], f"{r['turn']}:{r['call']}", r["tool"], r["status"], r["expires_at"] or "", json.dumps(r["input"])[:60]]
        for r in requests
    ]
    _print_table(rows, ["ID", "RUN", "TURN:CALL", "TOOL", "STATUS", "EXPIRES", "INPUT"])
    for r in requests:
        if r["link"]:
            print(f"{r['approval_id']}: {r['link']}")
    if why and args.status == "pending":
        print(f"(no decision links: {why})", file=sys.stderr)
    return 0


def cmd_inbox_link(args: argparse.Namespace) -> int:
    """A signed, expiring link to the inbox of an agent's runs or of named runs."""
    from longstep import clock, links

    api_url, ring, why = _link_minter(args)
    if ring is None or api_url is None:
        raise CliError(f"no inbox link: {why}", hint="the stack's LinkKeySecretArn must be readable with your credentials")
    scope = links.Scope(agent=args.agent) if args.agent else links.Scope(runs=tuple(args.run))
    capability = links.Capability(scope, int(clock.now() + args.hours * 3600), subject=_caller(args))
    url = links.inbox_url(api_url, ring.sign(capability))
    print(json.dumps({"link": url, "expires_in_hours": args.hours}) if args.output == "json" else url)
    return 0


def _decide(args: argparse.Namespace, body: dict[str, Any]) -> int:
    from longstep.errors import ApprovalAlreadyDecidedError

    try:
        decided = _service(args).decide(args.approval_id, body, _caller(args))
    except ApprovalAlreadyDecidedError as exc:
        print(f"error: {exc}; the first decision stands: {json.dumps(exc.decision)}", file=sys.stderr)
        return 2
    print(
        f"{decided['status']}: {decided['approval_id']} (run {decided['run_id']}, turn {decided['turn']}, call {decided['call']}, {decided['tool']}) by {decided['approver']}"
    )
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"decision": "approve"}
    if args.edit is not None:
        body = {"decision": "edit", "input": _json_arg(args.edit, "--edit")}
    if args.reason:
        body["reason"] = args.reason
    return _decide(args, body)


def cmd_reject(args: argparse.Namespace) -> int:
    return _decide(args, {"decision": "reject", "reason": args.reason})


# -- escalations ---------------------------------------------------------------------------------


def _runs_with_pending_escalations(store: Any) -> list[str]:
    """Run ids with a pending escalation: a scan of the checkpoint table (give --run on big tables)."""
    runs: set[str] = set()
    kwargs: dict[str, Any] = {
        "TableName": store.table_name,
        "FilterExpression": "begins_with(sk, :esc) AND #st = :pending",
        "ProjectionExpression": "pk",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": {":esc": {"S": "escalation#"}, ":pending": {"S": "pending"}},
    }
    while True:
        page = store.client.scan(**kwargs)
        runs.update(item["pk"]["S"] for item in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return sorted(runs)
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def cmd_escalations(args: argparse.Namespace) -> int:
    from longstep.humans.escalations import pending_escalations

    store = _service(args).store
    runs = [args.run] if args.run else _runs_with_pending_escalations(store)
    found = page(args, [e for run_id in runs for e in pending_escalations(store, run_id)])
    if args.json:
        print_data(args, found)
        return 0
    if not found:
        print("no pending escalations" + (f" for run {args.run}" if args.run else ""))
        return 0
    rows = [
        [
            e["run_id"],
            str(e["turn"]),
            "" if e["call"] is None else str(e["call"]),
            e["task"],
            e.get("tool") or "",
            e["error"],
            str(e["times"]),
            e["reason"][:60],
        ]
        for e in found
    ]
    _print_table(rows, ["RUN", "TURN", "CALL", "TASK", "TOOL", "ERROR", "TIMES", "REASON"])
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from longstep.humans.escalations import Resolution, resolve
    from longstep.inputs import parse_model

    if args.skip is not None:
        answer: dict[str, Any] = {"action": "skip", "result": _json_arg(args.skip, "--skip")}
    elif args.abort:
        answer = {"action": "abort"}
    else:
        answer = {"action": "retry"}
    if args.not_happened:
        if answer["action"] != "retry":
            raise CliError("--not-happened goes with --retry: the call did not act, so it runs once")
        answer["happened"] = False
    resolution = parse_model(Resolution, {**answer, "resolver": _caller(args)}, "resolution")
    service = _service(args)
    resolve(service.store, service.sfn, args.run_id, args.turn, args.call, resolution)
    where = f"turn {args.turn}" + ("" if args.call is None else f" call {args.call}")
    print(f"{resolution.action}: run {args.run_id} {where} by {resolution.resolver}")
    return 0


# -- signals -------------------------------------------------------------------------------------


def _signal_one_or_where(args: argparse.Namespace) -> int:
    """``signal RUN_ID NAME``, or ``signal NAME --where EXPR`` (the one positional is then the event)."""
    from longstep_kit.cli.where import one_or_where

    if args.where is not None and args.name is None:
        args.run_id, args.name = None, args.run_id
    if args.name is None:
        raise CliError("name: the event to signal is required (longstep signal RUN_ID NAME, or signal NAME --where EXPR)")
    if args.where is not None:
        args.event = args.name
    return one_or_where("signal", cmd_signal)(args)


def cmd_signal(args: argparse.Namespace) -> int:
    from longstep.errors import SignalRefusedError

    payload = _json_arg(args.payload, "--payload")
    service = _service(args)
    try:  # the same checks as the approval API's route and the EventBridge target (signals.send)
        outcome = service.signal(args.run_id, args.name, payload, buffer=args.buffer)
    except SignalRefusedError as exc:
        hint = "pass --buffer to keep the signal for a run that starts later" if exc.status == 404 else None
        raise CliError(str(exc), hint=hint) from None
    print(f"{outcome['outcome']}: signal {outcome['event']} for run {outcome['run_id']}")
    return 0


def _stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    p.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    p.add_argument("--approvals-table", help="use this approvals table instead of the stack's")


def _register_inbox_link(sub: Any) -> None:
    inbox = sub.add_parser(
        "inbox-link",
        help="print a signed, expiring link to the approval inbox of an agent's runs or of named runs. Example: longstep inbox-link --agent triage",
    )
    who = inbox.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", help="every run of this agent")
    who.add_argument("--run", action="append", metavar="RUN_ID", help="this run (repeat for several)")
    inbox.add_argument("--hours", type=int, default=24, help="how long the link works (default 24)")
    inbox.add_argument("--pages-url", help="the pages' base URL instead of the stack's approval API (a local server's, as `local serve` prints it)")
    _stack_options(inbox)
    inbox.set_defaults(func=cmd_inbox_link)


def register(sub: Any) -> None:
    _register_inbox_link(sub)
    approvals = sub.add_parser("approvals", help="list approval requests (pending by default)")
    add_paging(approvals)
    approvals.add_argument("--run", help="only this run's")
    approvals.add_argument("--status", default="pending", choices=["pending", "approved", "rejected", "edited", "expired"])
    approvals.add_argument("--json", action="store_true", help="print JSON")
    approvals.add_argument(
        "--pages-url", help="link to these pages instead of the stack's approval API (a local server's, as `local serve` prints it)"
    )
    _stack_options(approvals)
    approvals.set_defaults(func=cmd_approvals)

    approve = sub.add_parser("approve", help="approve a request, or approve it with edited arguments (--edit)")
    approve.add_argument("approval_id")
    approve.add_argument("--edit", metavar="JSON", help="the arguments to run the call with instead (checked against the tool's schema)")
    approve.add_argument("--reason", help="why (recorded with the decision)")
    _stack_options(approve)
    approve.set_defaults(func=cmd_approve)

    reject = sub.add_parser("reject", help="reject a request; the model is told the reason")
    reject.add_argument("approval_id")
    reject.add_argument("--reason", required=True)
    _stack_options(reject)
    reject.set_defaults(func=cmd_reject)

    escalations = sub.add_parser("escalations", help="list steps waiting for a human (retry, skip or abort)")

    add_paging(escalations)
    escalations.add_argument("--run", help="only this run's (without it, the checkpoint table is scanned)")
    escalations.add_argument("--json", action="store_true", help="print JSON")
    _stack_options(escalations)
    escalations.set_defaults(func=cmd_escalations)

    resolve = sub.add_parser("resolve", help="answer an escalation: retry the step, skip it with a result, or abort the run")
    resolve.add_argument("run_id")
    resolve.add_argument("turn", type=int)
    resolve.add_argument("--call", type=int, help="the tool call's index (omit for the model turn itself)")
    action = resolve.add_mutually_exclusive_group(required=True)
    action.add_argument("--retry", action="store_true", help="run the step again")
    action.add_argument("--skip", metavar="JSON", help="record JSON as the step's result and go on")
    action.add_argument("--abort", action="store_true", help="end the run (EscalationAborted)")
    resolve.add_argument("--not-happened", action="store_true", help="with --retry: the interrupted call did not act; run it once")
    _stack_options(resolve)
    resolve.set_defaults(func=cmd_resolve)

    signal = sub.add_parser("signal", help="send a signal to a run (a waiting wait_for takes it, else it is kept)")
    signal.add_argument("run_id", nargs="?", help="the run (with --where: omit it, and give only the event name)")
    signal.add_argument("name", nargs="?", help="the event name the run waits for")
    signal.add_argument("--payload", default="{}", metavar="JSON", help="the signal's payload (a JSON object)")
    signal.add_argument("--buffer", action="store_true", help="keep the signal even if the run does not exist yet")
    add_where(signal, "signal")
    _stack_options(signal)
    signal.set_defaults(func=_signal_one_or_where)
