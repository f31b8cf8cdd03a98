"""The storage section of ``bench/RESULTS.md``, rendered from ``bench/results/storage.json``.

Everything in it that depends on a measurement is computed from the results file, so a re-run
after the runtime changes rewrites the section. The goals and their verdicts are in
``bench/storage/goals.py``, the closing sections (how it is measured, machine, harness notes) in
``bench/storage/method.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.storage.figures import SHORT, count, has_bytes, mb, times
from bench.storage.goals import goal_lines
from bench.storage.method import method_lines
from bench.storage.systems import LABELS, SYSTEMS

BEGIN, END = "<!-- bench-storage:begin -->", "<!-- bench-storage:end -->"
TITLE = "# Benchmark results"


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

    lines.append("| **stored bytes** (DynamoDB + S3) | " + cells(lambda e, s: f"**{mb(e['bytes'])}**") + " |")
    lines.append("| items (DynamoDB items + S3 objects) | " + cells(lambda e, s: count(e["items"])) + " |")
    lines.append("| in DynamoDB | " + cells(lambda e, s: f"{mb(e['dynamodb_bytes'])} in {count(e['dynamodb_items'])}") + " |")
    lines.append("| in S3 | " + cells(lambda e, s: f"{mb(e['s3_bytes'])} in {count(e['s3_objects'])}") + " |")
    lines.append("| largest DynamoDB item | " + cells(lambda e, s: f"{e['largest_dynamodb_item_bytes'] / 1024:,.0f} KB") + " |")
    if has_bytes(ls):
        lines.append("| Longstep is smaller by | " + cells(lambda e, s: "1x" if s == "longstep" else times(e["bytes"] / ls["bytes"])) + " |")
    lines.append("| resume: requests | " + cells(lambda e, s: count(e["resume"]["requests"])) + " |")
    lines.append("| resume: items read | " + cells(lambda e, s: count(e["resume"]["items_read"])) + " |")
    lines.append("| resume: bytes read | " + cells(lambda e, s: mb(e["resume"]["bytes_read"])) + " |")

    def every(e: dict[str, Any], s: str) -> str:
        m = e.get("resume_every_turn")
        return (
            "-"
            if not m
            else f"max {m['max_requests']} requests, {count(m['max_items_read'])} items, {mb(m['max_bytes_read'])} (mean {mb(m['mean_bytes_read'])})"
        )

    lines.append("| resume at every turn (cold) | " + cells(every) + " |")
    lines.append(
        "| whole run: read requests / bytes read | "
        + cells(lambda e, s: f"{count(e['run_requests']['requests'])} / {mb(e['run_requests']['bytes_read'])}")
        + " |"
    )
    lines.append("| whole run: write requests | " + cells(lambda e, s: count(e["run_requests"]["write_requests"])) + " |")
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
        if not has_bytes(ls):
            continue
        tables = ls["by_table"]
        idem = sum(t["bytes"] for n, t in tables.items() if "idempotency" in n)
        ckpt = sum(t["bytes"] for n, t in tables.items() if "checkpoint" in n)
        other = ls["dynamodb_bytes"] - idem - ckpt
        text = (
            f"{int(turns):,} turns: checkpoint table {mb(ckpt)}, idempotency table {mb(idem)} "
            f"({idem / ls['bytes']:.0%} of the total), artifacts in S3 {mb(ls['s3_bytes'])}" + (f", other tables {mb(other)}" if other else "") + "."
        )
        if ckpt and idem > 0.5 * ckpt:
            text += (
                f" The idempotency records are {idem / ckpt:.1f}x the bytes of the checkpoint table: the step lock "
                "keeps a copy of each step's result (uncompressed) until the record expires."
            )
            full = row.get("full_snapshot")
            if has_bytes(full) and ls["bytes"] > idem:
                text += f" Without them Longstep would be {times(full['bytes'] / (ls['bytes'] - idem))} smaller than full snapshots."
        notes.append(text)
        run = ls["run_requests"]
        model_calls = ls["context"]["model_calls"] or 1
        notes.append(
            f"{int(turns):,} turns: recording the session made {count(run['requests'])} read requests returning "
            f"{count(run['items_read'])} items, {mb(run['bytes_read'])} ({run['bytes_read'] / max(1, ls['bytes']):,.0f}x the bytes stored); "
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
            parts.append(label.format(count(d[key])))
    if d.get("resume_messages") is not None:
        parts.append(f"the resumed context has {count(d['resume_messages'])} messages (full transcript: {count(d['transcript_messages'])})")
    return (" Runtime settings and behaviour: " + "; ".join(parts) + ".") if parts else ""


def render(doc: dict[str, Any]) -> str:
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
        *[
            f"The {', '.join(f'{int(t):,}' for t in m['turns'])}-turn results are another run's (`{m['direct_command']}`, "
            f"in `{m['file']}`; runtime of commit {m['runtime'].get('commit', '?')}, sources {m['runtime'].get('sha256', '?')}), added by `--merge`."
            for m in doc.get("merged", [])
            if m["turns"]
        ],
        *([""] if any(m["turns"] for m in doc.get("merged", [])) else []),
        f"One deterministic simulated coding session (seed {doc['seed']}) recorded four ways on moto, "
        "bytes counted as stored: the DynamoDB size of every item left in the system's tables "
        "(idempotency records included) plus every S3 object. MB = 10^6 bytes, KB = 1,024 bytes.",
        "",
    ]
    out += goal_lines(doc["goals"])
    for turns in doc["results"]:
        stats = doc["sessions"].get(turns, {})
        out += ["", f"### {int(turns):,}-turn session", ""]
        if stats:
            out.append(
                f"{count(stats['tool_calls'])} tool calls ({', '.join(f'{k} {v}' for k, v in stats['tool_calls_by_name'].items())}); "
                f"{mb(stats['tool_output_bytes'])} of tool output ({mb(stats['distinct_tool_output_bytes'])} distinct), "
                f"{mb(stats['model_text_bytes'])} of model text; {stats['reads']} file reads, of which "
                f"{stats['rereads_after_edit']} re-read a file after an edit and {stats['rereads_unchanged']} re-read an unchanged file."
                + (
                    f" The floor (its distinct content, each item compressed on its own: `bench/storage/session.py`'s `floor_bytes`) is {mb(stats['floor_bytes'])}."
                    if stats.get("floor_bytes")
                    else ""
                )
            )
            out.append("")
        out += _table(doc, turns)
        ls = doc["results"][turns].get("longstep")
        if has_bytes(ls):
            ctx = ls["context"]
            parts = ", ".join(
                f"{name.removeprefix('longstep-')} {mb(t['bytes'])} ({count(t['items'])} items)" for name, t in ls["by_table"].items() if t["items"]
            )
            buckets = ", ".join(f"artifacts {mb(b['bytes'])} ({count(b['objects'])} objects)" for b in ls["by_bucket"].values())
            out += [
                "",
                f"Longstep's bytes by table: {parts}; {buckets}. "
                f"Context given to the model: max {count(ctx['max_context_tokens'])} tokens (turn {ctx['max_context_turn']}), "
                f"budget: {'none' if ctx['budget_tokens'] is None else count(ctx['budget_tokens'])}. "
                f"Resume read {count(ls['resume']['items_read'])} items; the checkpoint table holds "
                f"{count(sum(t['items'] for n, t in ls['by_table'].items() if 'checkpoint' in n))}." + _runtime_details(ls.get("details", {})),
            ]

    notes = _longstep_notes(doc)
    if notes:
        out += ["", "### Where Longstep's bytes and reads go", ""] + [f"- {n}" for n in notes]

    ratios = []
    for turns in doc["results"]:
        row = doc["results"][turns]
        ls = row.get("longstep")
        if not has_bytes(ls):
            continue
        for s in ("full_snapshot", "langgraph", "langgraph_delta"):
            if has_bytes(row.get(s)):
                ratios.append(f"| {int(turns):,} | {SHORT[s]} | {times(row[s]['bytes'] / ls['bytes'])} | {ls['bytes'] / row[s]['bytes']:.4f} |")
    if ratios:
        out += ["", "### Ratios (same run)", "", "| turns | vs | other / Longstep | Longstep / other |", "|---|---|---:|---:|"] + ratios

    out += method_lines(doc)
    return "\n".join(out)


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
