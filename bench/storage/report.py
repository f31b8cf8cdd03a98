"""Goals from issue 5, checked against the numbers, and the storage section of ``bench/RESULTS.md``.

Everything in RESULTS.md that depends on a measurement is computed here from storage.json, so a
re-run after the runtime changes rewrites the verdicts too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.storage.systems import LABELS, SYSTEMS

BEGIN, END = "<!-- bench-storage:begin -->", "<!-- bench-storage:end -->"
TITLE = "# Benchmark results"

SHORT = {
    "full_snapshot": "Full snapshot",
    "langgraph": "LangGraph",
    "langgraph_delta": "LangGraph + DeltaChannel",
    "longstep": "Longstep",
}

# A resume "costs the same" when requests and items do not grow and bytes grow at most this much
# (the bytes of a bounded window still depend on what the last turns happened to hold).
RESUME_BYTES_TOLERANCE = 1.25
# Issue 10: a cold model turn reads the run record and one Query.
RESUME_MAX_REQUESTS = 2


def _ok(entry: dict[str, Any] | None) -> bool:
    return bool(entry) and "bytes" in entry


def _get(doc: dict[str, Any], turns: int, system: str) -> dict[str, Any] | None:
    return doc["results"].get(str(turns), {}).get(system)


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f} MB" if n < 1e10 else f"{n / 1e9:,.1f} GB"


def _int(n: int) -> str:
    return f"{n:,}"


def _x(ratio: float) -> str:
    return f"{ratio:,.1f}x" if ratio < 100 else f"{ratio:,.0f}x"


def evaluate(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals, each with ``met`` (True/False, or None when it could not be measured)."""
    goals: list[dict[str, Any]] = []
    ls200, full200, delta200 = _get(doc, 200, "longstep"), _get(doc, 200, "full_snapshot"), _get(doc, 200, "langgraph_delta")

    goal: dict[str, Any] = {"id": "vs_full_snapshots", "goal": "Longstep at least 200x smaller than full snapshots (200 turns); aim 500x"}
    if _ok(ls200) and _ok(full200):
        ratio = full200["bytes"] / ls200["bytes"]
        goal.update(met=ratio >= 200, measured=round(ratio, 1), stretch_met=ratio >= 500)
        if ratio < 200:
            goal["gap"] = (
                f"{_x(ratio)} smaller, not 200x: Longstep must store at most {_mb(full200['bytes'] / 200)}, it stores {_mb(ls200['bytes'])} ({ls200['bytes'] / (full200['bytes'] / 200):.1f}x too much)"
            )
    else:
        goal.update(met=None, gap="not measured (a run failed or was skipped)")
    goals.append(goal)

    goal = {"id": "vs_langgraph_delta", "goal": "Longstep at most 1/3 of LangGraph + DeltaChannel (200 turns); aim 1/10"}
    if _ok(ls200) and _ok(delta200):
        frac = ls200["bytes"] / delta200["bytes"]
        goal.update(met=frac <= 1 / 3, measured=round(frac, 3), stretch_met=frac <= 0.1)
        if frac > 1 / 3:
            goal["gap"] = (
                f"Longstep stores {frac:.2f} of LangGraph + DeltaChannel's bytes, not 1/3: at most {_mb(delta200['bytes'] / 3)}, it stores {_mb(ls200['bytes'])} ({frac * 3:.1f}x too much)"
            )
    elif _get(doc, 200, "langgraph_delta") and "unavailable" in _get(doc, 200, "langgraph_delta"):
        goal.update(met=None, gap=_get(doc, 200, "langgraph_delta")["unavailable"])
    else:
        goal.update(met=None, gap="not measured (a run failed or was skipped)")
    goals.append(goal)

    ls1000 = _get(doc, 1000, "longstep")
    goal = {"id": "resume_bounded", "goal": "Longstep's resume cost the same at 1,000 turns as at 200"}
    if _ok(ls200) and _ok(ls1000):
        a, b = ls200["resume"], ls1000["resume"]
        met = b["requests"] <= a["requests"] and b["items_read"] <= a["items_read"] and b["bytes_read"] <= RESUME_BYTES_TOLERANCE * a["bytes_read"]
        goal.update(
            met=met,
            measured={"200": a, "1000": b},
        )
        if not met:
            goal["gap"] = (
                f"resume grows with the run: {a['requests']} -> {b['requests']} requests, "
                f"{_int(a['items_read'])} -> {_int(b['items_read'])} items, {_mb(a['bytes_read'])} -> {_mb(b['bytes_read'])} "
                f"({b['bytes_read'] / max(1, a['bytes_read']):.1f}x) from 200 to 1,000 turns"
            )
    else:
        goal.update(met=None, gap="not measured (needs Longstep at 200 and 1,000 turns)")
    goals.append(goal)

    goal = {"id": "resume_every_turn", "goal": "Longstep's cold resume reads at most 2 DynamoDB requests at every turn (issue 10)"}
    measured_runs = {
        t: r["resume_every_turn"] for t, r in ((t, _get(doc, int(t), "longstep")) for t in doc["results"]) if _ok(r) and "resume_every_turn" in r
    }
    if measured_runs:
        worst = {t: m["max_requests"] for t, m in measured_runs.items()}
        goal.update(met=all(v <= RESUME_MAX_REQUESTS for v in worst.values()), measured={t: m["turns_by_requests"] for t, m in measured_runs.items()})
        if not goal["met"]:
            goal["gap"] = "turns needing more: " + "; ".join(f"{t} turns: {m['turns_by_requests']}" for t, m in measured_runs.items())
    else:
        goal.update(met=None, gap="not measured (needs Longstep with the per-turn resume measurement)")
    goals.append(goal)

    goal = {"id": "context_budget", "goal": "Longstep's live context never above the budget"}
    runs = [(t, _get(doc, int(t), "longstep")) for t in doc["results"]]
    runs = [(t, r) for t, r in runs if _ok(r)]
    if runs:
        budgets = {r["context_budget_tokens"] for _, r in runs}
        peak = max(runs, key=lambda tr: tr[1]["max_context_tokens"])
        if budgets == {None}:
            goal.update(
                met=False,
                measured={t: r["max_context_tokens"] for t, r in runs},
                budget=None,
                gap=f"the runtime has no context budget yet (no context_budget_tokens setting): the context grows with the run, up to {_int(peak[1]['max_context_tokens'])} tokens at {peak[0]} turns",
            )
        else:
            over = {t: r["context"]["over_budget_calls"] for t, r in runs}
            goal.update(
                met=all(v == 0 for v in over.values()),
                measured={t: r["max_context_tokens"] for t, r in runs},
                budget=sorted(b for b in budgets if b is not None),
            )
            if not goal["met"]:
                goal["gap"] = f"model calls over the budget: {over}"
    else:
        goal.update(met=None, gap="not measured")
    goals.append(goal)
    return goals


def _verdict(goal: dict[str, Any]) -> str:
    if goal["met"] is None:
        return "**not measured**"
    return "**met**" if goal["met"] else "**NOT met**"


def _table(doc: dict[str, Any], turns: str) -> list[str]:
    row = doc["results"][turns]
    systems = [s for s in SYSTEMS if s in row]
    lines = ["| | " + " | ".join(SHORT[s] for s in systems) + " |", "|---|" + "---:|" * len(systems)]
    ls = row.get("longstep")

    def cells(fn: Any) -> str:
        out = []
        for s in systems:
            e = row[s]
            if "error" in e:
                out.append("failed")
            elif "unavailable" in e:
                out.append("n/a")
            else:
                out.append(fn(e, s))
        return " | ".join(out)

    lines.append("| **stored bytes** (DynamoDB + S3) | " + cells(lambda e, s: f"**{_mb(e['bytes'])}**") + " |")
    lines.append("| items (DynamoDB items + S3 objects) | " + cells(lambda e, s: _int(e["items"])) + " |")
    lines.append("| in DynamoDB | " + cells(lambda e, s: f"{_mb(e['dynamodb_bytes'])} in {_int(e['dynamodb_items'])}") + " |")
    lines.append("| in S3 | " + cells(lambda e, s: f"{_mb(e['s3_bytes'])} in {_int(e['s3_objects'])}") + " |")
    lines.append("| largest DynamoDB item | " + cells(lambda e, s: f"{e['largest_dynamodb_item_bytes'] / 1024:,.0f} KB") + " |")
    if _ok(ls):
        lines.append("| Longstep is smaller by | " + cells(lambda e, s: "1x" if s == "longstep" else _x(e["bytes"] / ls["bytes"])) + " |")
    lines.append("| resume: requests | " + cells(lambda e, s: _int(e["resume"]["requests"])) + " |")
    lines.append("| resume: items read | " + cells(lambda e, s: _int(e["resume"]["items_read"])) + " |")
    lines.append("| resume: bytes read | " + cells(lambda e, s: _mb(e["resume"]["bytes_read"])) + " |")

    def every(e: dict[str, Any], s: str) -> str:
        m = e.get("resume_every_turn")
        return (
            "-"
            if not m
            else f"max {m['max_requests']} requests, {_int(m['max_items_read'])} items, {_mb(m['max_bytes_read'])} (mean {_mb(m['mean_bytes_read'])})"
        )

    lines.append("| resume at every turn (cold) | " + cells(every) + " |")
    lines.append(
        "| whole run: read requests / bytes read | "
        + cells(lambda e, s: f"{_int(e['run_requests']['requests'])} / {_mb(e['run_requests']['bytes_read'])}")
        + " |"
    )
    lines.append("| whole run: write requests | " + cells(lambda e, s: _int(e["run_requests"]["write_requests"])) + " |")
    lines.append("| wall time of the job | " + cells(lambda e, s: f"{e['wall_seconds']:.0f} s") + " |")
    for s in systems:
        e = row[s]
        if "error" in e:
            lines += ["", f"{LABELS[s]} failed at {turns} turns:", "", "```", e["error"].strip()[-2000:], "```"]
        elif "unavailable" in e:
            lines += ["", f"{LABELS[s]}: {e['unavailable']}"]
    return lines


def _longstep_notes(doc: dict[str, Any]) -> list[str]:
    notes = []
    for turns, row in doc["results"].items():
        ls = row.get("longstep")
        if not _ok(ls):
            continue
        tables = ls["by_table"]
        idem = sum(t["bytes"] for n, t in tables.items() if "idempotency" in n)
        ckpt = sum(t["bytes"] for n, t in tables.items() if "checkpoint" in n)
        other = ls["dynamodb_bytes"] - idem - ckpt
        text = (
            f"{int(turns):,} turns: checkpoint table {_mb(ckpt)}, idempotency table {_mb(idem)} "
            f"({idem / ls['bytes']:.0%} of the total), artifacts in S3 {_mb(ls['s3_bytes'])}"
            + (f", other tables {_mb(other)}" if other else "")
            + "."
        )
        if ckpt and idem > 0.5 * ckpt:
            text += (
                f" The idempotency records are {idem / ckpt:.1f}x the bytes of the checkpoint table: the step lock "
                "keeps a copy of each step's result (uncompressed) until the record expires."
            )
            full = row.get("full_snapshot")
            if _ok(full) and ls["bytes"] > idem:
                text += f" Without them Longstep would be {_x(full['bytes'] / (ls['bytes'] - idem))} smaller than full snapshots."
        notes.append(text)
        run = ls["run_requests"]
        model_calls = ls["context"]["model_calls"] or 1
        notes.append(
            f"{int(turns):,} turns: recording the session made {_int(run['requests'])} read requests returning "
            f"{_int(run['items_read'])} items, {_mb(run['bytes_read'])} ({run['bytes_read'] / max(1, ls['bytes']):,.0f}x the bytes stored); "
            f"{run['items_read'] / model_calls:,.0f} items per model turn on average."
        )
    return notes


def _runtime_details(d: dict[str, Any]) -> str:
    parts = []
    for key, label in (
        ("offload_threshold_bytes", "offload threshold {} bytes"),
        ("snapshot_every", "snapshot every {} turns"),
        ("keep_recent_turns", "{} recent turns kept verbatim"),
        ("turns_per_execution", "{} turns per execution"),
        ("continued_as_new", "continued as new {} time(s)"),
        ("summaries", "{} summaries made"),
    ):
        if d.get(key) is not None:
            parts.append(label.format(_int(d[key])))
    if d.get("resume_messages") is not None:
        parts.append(f"the resumed context has {_int(d['resume_messages'])} messages (full transcript: {_int(d['transcript_messages'])})")
    return (" Runtime settings and behaviour: " + "; ".join(parts) + ".") if parts else ""


def _runtime_line(rt: dict[str, Any]) -> str:
    if rt.get("source") == "worktree":
        where = f"the working tree at commit {rt.get('commit', '?')}" + (" with uncommitted runtime changes" if rt.get("uncommitted_changes") else "")
    else:
        where = f"git revision {rt.get('source', '?')} (commit {rt.get('commit', '?')})"
    return f"- Longstep runtime measured: {where}; sources sha256 {rt.get('sha256', '?')} (a copy taken when the run started)"


def _slowest(doc: dict[str, Any]) -> str:
    jobs = [(e["wall_seconds"], s, t) for t, row in doc["results"].items() for s, e in row.items() if "wall_seconds" in e]
    if not jobs:
        return ""
    wall, system, turns = max(jobs)
    return f"; the slowest job is {SHORT[system]} at {int(turns):,} turns ({wall:.0f} s)"


def render(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    goals = doc["goals"]
    out = [
        "## Storage: Longstep vs full snapshots vs LangGraph with DynamoDBSaver (issue 5)",
        "",
        "Generated by `bench/storage/` (do not edit by hand between the markers). Regenerate with:",
        "",
        "```",
        doc["command"] + "        # installs .[bench] into .venv, then runs the line below",
        doc["direct_command"],
        "```",
        "",
        f"One deterministic simulated coding session (seed {doc['seed']}) recorded four ways on moto, "
        "bytes counted as stored: the DynamoDB size of every item left in the system's tables "
        "(idempotency records included) plus every S3 object. MB = 10^6 bytes, KB = 1,024 bytes.",
        "",
        "### Goals (issue 5)",
        "",
        "| goal | measured | verdict |",
        "|---|---|---|",
    ]
    for g in goals:
        if g["id"] == "vs_full_snapshots" and "measured" in g:
            measured = f"{_x(g['measured'])} smaller" + (" (500x stretch met)" if g.get("stretch_met") else "")
        elif g["id"] == "vs_langgraph_delta" and "measured" in g:
            measured = f"{g['measured']:.3f} of LangGraph + DeltaChannel (1/{1 / g['measured']:.1f})" + (
                " (1/10 stretch met)" if g.get("stretch_met") else ""
            )
        elif g["id"] == "resume_bounded" and "measured" in g:
            a, b = g["measured"]["200"], g["measured"]["1000"]
            measured = f"200 turns: {a['requests']} requests, {_int(a['items_read'])} items, {_mb(a['bytes_read'])}; 1,000 turns: {b['requests']} requests, {_int(b['items_read'])} items, {_mb(b['bytes_read'])}"
        elif g["id"] == "resume_every_turn" and "measured" in g:
            measured = "; ".join(
                f"{int(t):,} turns: " + ", ".join(f"{_int(n)} turns at {r} requests" for r, n in m.items()) for t, m in g["measured"].items()
            )
        elif g["id"] == "context_budget" and "measured" in g:
            budget = "no budget" if g.get("budget") is None else "budget " + " / ".join(_int(b) for b in g["budget"]) + " tokens"
            measured = "max " + ", ".join(f"{_int(v)} tokens at {t} turns" for t, v in g["measured"].items()) + f"; {budget}"
        else:
            measured = "-"
        out.append(f"| {g['goal']} | {measured} | {_verdict(g)} |")
    gaps = [g for g in goals if g.get("gap") and g["met"] is not True]
    if gaps:
        out += ["", "Gaps, plainly:", ""]
        out += [f"- **{g['goal']}**: {g['gap']}." for g in gaps]

    for turns in doc["results"]:
        stats = doc["sessions"].get(turns, {})
        out += ["", f"### {int(turns):,}-turn session", ""]
        if stats:
            out.append(
                f"{_int(stats['tool_calls'])} tool calls ({', '.join(f'{k} {v}' for k, v in stats['tool_calls_by_name'].items())}); "
                f"{_mb(stats['tool_output_bytes'])} of tool output ({_mb(stats['distinct_tool_output_bytes'])} distinct), "
                f"{_mb(stats['model_text_bytes'])} of model text; {stats['reads']} file reads, of which "
                f"{stats['rereads_after_edit']} re-read a file after an edit and {stats['rereads_unchanged']} re-read an unchanged file."
            )
            out.append("")
        out += _table(doc, turns)
        ls = doc["results"][turns].get("longstep")
        if _ok(ls):
            ctx = ls["context"]
            parts = ", ".join(
                f"{name.removeprefix('longstep-')} {_mb(t['bytes'])} ({_int(t['items'])} items)" for name, t in ls["by_table"].items() if t["items"]
            )
            buckets = ", ".join(f"artifacts {_mb(b['bytes'])} ({_int(b['objects'])} objects)" for b in ls["by_bucket"].values())
            out += [
                "",
                f"Longstep's bytes by table: {parts}; {buckets}. "
                f"Context given to the model: max {_int(ctx['max_context_tokens'])} tokens (turn {ctx['max_context_turn']}), "
                f"budget: {'none' if ctx['budget_tokens'] is None else _int(ctx['budget_tokens'])}. "
                f"Resume read {_int(ls['resume']['items_read'])} items; the checkpoint table holds "
                f"{_int(sum(t['items'] for n, t in ls['by_table'].items() if 'checkpoint' in n))}." + _runtime_details(ls.get("details", {})),
            ]

    notes = _longstep_notes(doc)
    if notes:
        out += ["", "### Where Longstep's bytes and reads go", ""] + [f"- {n}" for n in notes]

    ratios = []
    for turns in doc["results"]:
        row = doc["results"][turns]
        ls = row.get("longstep")
        if not _ok(ls):
            continue
        for s in ("full_snapshot", "langgraph", "langgraph_delta"):
            if _ok(row.get(s)):
                ratios.append(f"| {int(turns):,} | {SHORT[s]} | {_x(row[s]['bytes'] / ls['bytes'])} | {ls['bytes'] / row[s]['bytes']:.4f} |")
    if ratios:
        out += ["", "### Ratios (same run)", "", "| turns | vs | other / Longstep | Longstep / other |", "|---|---|---:|---:|"] + ratios

    out += [
        "",
        "### How it is measured",
        "",
        "- **Session** (`bench/storage/session.py`): a seeded RNG drives an agent through a synthetic "
        "repository of 70 Python-like files of 2-60 KB (log-uniform). Each turn has reasoning text and 1-3 tool "
        "calls: `read_file` (the file's text; files are read again after edits, and sometimes unchanged), `grep` "
        "(path:line:text matches), `edit_file` (old/new strings in the model's toolUse, a diff back), `run_tests` "
        "(pytest-style logs with tracebacks), `git_diff`, `list_files`. The last turn answers without tools. "
        "Model messages are Bedrock Converse messages (text + toolUse), as `longstep.messages` uses.",
        "- **Full snapshot**: the whole Converse message list, JSON, written again after every step (the model's "
        "reply, and the turn's tool results: two steps per turn with tools, as LangGraph's supersteps), one DynamoDB "
        "item per step; a snapshot whose item would pass DynamoDB's 400 KB limit goes to S3 and the item keeps its key. "
        "Resume: newest item (Query, newest first, Limit 1) and its S3 object.",
        "- **LangGraph**: a `StateGraph` agent -> tools loop with `messages: Annotated[list[AnyMessage], add_messages]`, "
        "compiled with `DynamoDBSaver(table_name, session, s3_offload_config={bucket_name})` from langgraph-checkpoint-aws "
        "(single table with string `PK`/`SK`, as its source expects; payloads over 350 KB to S3; no compression or TTL: the "
        'defaults). One `invoke` runs the session (`durability="sync"`: the same records as the default async mode, written '
        "from one thread for moto). Resume at the last turn: a new saver and `graph.get_state(config)` at the checkpoint "
        "the final model call starts from (the parent of the thread's final checkpoint: a finished thread's last "
        "checkpoint is not what a crash before the last model call leaves behind).",
        "- **LangGraph + DeltaChannel** (`langgraph.channels.delta.DeltaChannel`, beta in the installed langgraph): the same with `messages: Annotated[list[AnyMessage], "
        "DeltaChannel(_messages_delta_reducer, snapshot_frequency=50)]` (the reducer langgraph documents for "
        "DeltaChannel). `DynamoDBSaver` does not override `get_delta_channel_history`, so a resume walks the "
        "ancestors one `get_tuple` at a time (the base class's default).",
        "- **Longstep**: the real runtime (`longstep.tasks.start.start_run`, then `model_turn` and `call_tool` for every "
        "turn, as the state machine calls them, each through a `Runtime.from_env` kept per Lambda function; on the "
        "`continue` route, the next execution's Init: `start_run` with the next generation) on tables created from "
        "`longstep.keys` and the artifacts bucket; an agent whose tools return the session's outputs, and "
        "`ScriptedProvider` (via `Runtime.model_override`) replaying the session's model messages. The runtime's "
        "defaults are used (offload threshold, snapshot cadence, context budget...). Resume at the last turn: a cold "
        "import of `longstep`, then `resume_context()` in `bench/storage/systems/longstep_runtime.py`: what a "
        "ModelTurn of the last turn loads for the model (`longstep.context.load(...).messages(turn)` when the runtime "
        "has that loader, else `load_run` + `transcript(run, store.steps(run_id))`). Resume at every turn: before "
        "each model turn of the run, the same `resume_context()` with the context cache emptied, on clients of its "
        "own (the whole-run rows do not count it); `resume_every_turn.requests_by_turn` in the results file gives "
        "the requests at every turn as `[first turn, last turn, requests]` runs.",
        "- **Bytes stored**: after the run, a Scan of each table (DynamoDB item size: attribute names + values) and "
        "a listing of each bucket. **Resume cost**: botocore `after-call` hooks on the clients: read requests "
        "(GetItem, Query, BatchGetItem, GetObject...), items returned (DynamoDB items + S3 objects) and their bytes. "
        '"Whole run" rows count the same over the recording of the session.',
        "- **Context tokens**: bytes / 4 of the JSON of the messages each model call is given (the scripted provider is wrapped to measure them).",
        "",
        "### Machine and versions",
        "",
        f"- nproc {m.get('nproc')}, {m.get('cpu', 'cpu unknown')}, {m.get('memory_gib', '?')} GiB; Python {m['python']}; {m['platform']}",
        "- " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()),
        _runtime_line(doc.get("runtime", {})),
        f"- {doc['jobs']} jobs side by side, one process and one moto account per job; total wall time **{doc['wall_seconds']:.0f} s**"
        + _slowest(doc)
        + ".",
        "",
        "### Harness notes",
        "",
        "- `bench/storage/fastmoto.py` speeds moto up without changing what is stored or read: DynamoDB item "
        "responses are written with `json.dumps` (the first 25 of each operation are checked against moto's own "
        "serializer), string keys compare as strings, and the two quadratic baselines keep only the newest 16 S3 "
        "bodies of their bucket (sizes, ETags and listings stay; reading a dropped body fails the run).",
        "- Longstep runs with one `Runtime` per Lambda function for the whole session (a warm container each); "
        "`longstep/handlers/*.py` build one per invocation. Storage is the same either way; with the runtime as measured, a "
        "`Runtime` per invocation registers one more Powertools user-agent hook on the shared, cached DynamoDB client "
        "each time, so every request of a long-lived container runs one hook per earlier invocation.",
        "- The resume measurement for Longstep re-imports `longstep` from scratch (a cold container): no cache a warm invocation may keep is reused.",
        _limits_line(doc),
        *_reduced_line(doc),
        "- langgraph-checkpoint-aws is pinned to 1.2.1: 1.2.2 and later require boto3>=1.43.64, which conflicts "
        "with the project's boto3==1.43.11 pin. Its DynamoDB saver is the same code as 1.2.6's (the only "
        "differences are an unused counter and how the region is passed to clients).",
        "",
    ]
    return "\n".join(out)


def _limits_line(doc: dict[str, Any]) -> str:
    """What of AWS's enforcement applies to this bench, and the largest payloads it checked."""
    largest = []
    for turns, row in doc["results"].items():
        checked = (row.get("longstep") or {}).get("payload_limit")
        if checked:
            top = max(checked["largest_bytes"].items(), key=lambda item: item[1])
            largest.append(f"{int(turns):,} turns: largest {top[0]} {top[1] / 1024:,.1f} KiB")
    return (
        "- AWS's limits: the bench calls the runtime's tasks in-process on tables it creates from `longstep.keys` (no deployed "
        "stack, so no roles and no state machine: the local stack's IAM and ASL checks have nothing to check here; the same "
        "handlers run under them in the cost and speed benches and in the suite). What the state machine would carry is "
        "checked: every Init, ModelTurn and CallTool answer (a state's output) and every execution input at most 256 KiB, "
        "else the run fails with `States.DataLimitExceeded` as in AWS ("
        + ("; ".join(largest) or "not recorded in this results file")
        + "); DynamoDB's 400 KB item limit is moto's own check (`fastmoto` changes only how responses are written)."
    )


def _reduced_line(doc: dict[str, Any]) -> list[str]:
    """A note when this run measured fewer session lengths than the full benchmark."""
    measured = sorted(int(t) for t in doc["results"])
    if measured == [200, 1000]:
        return []
    return [
        f"- **Reduced size**: this run measured the {', '.join(f'{t:,}' for t in measured)}-turn session only "
        f"(`{doc['direct_command']}`): the full run (200 and 1,000 turns) takes about 23 minutes of this shared 2-core "
        "machine (1,389 s at commit 88bfc8c, whose 1,000-turn results are in git history); the 1,000-turn goals are "
        "marked not measured above."
    ]


def write_section(report: Path, section: str) -> None:
    """Put ``section`` in ``report`` between the storage markers (other benchmarks' sections stay)."""
    block = f"{BEGIN}\n{section.strip()}\n{END}"
    text = report.read_text() if report.exists() else ""
    if BEGIN in text and END in text:
        before, _, rest = text.partition(BEGIN)
        _, _, after = rest.partition(END)
        text = before + block + after
    else:
        if text.startswith("# Storage benchmark"):  # unmarked output of an earlier version of this benchmark
            cut = text.find("<!-- ")
            text = text[cut:] if cut >= 0 else ""
        body = text.strip()
        if body.startswith(TITLE):
            body = body[len(TITLE) :].strip()
        text = f"{TITLE}\n\n{block}\n" + (f"\n{body}\n" if body else "")
    report.write_text(text if text.endswith("\n") else text + "\n")
