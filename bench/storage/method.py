"""The storage report's closing sections: how it is measured, the machine and versions, the harness notes.

Mostly fixed prose about ``bench/storage/``; what depends on the run (the runtime measured, the
slowest job, the largest payloads checked, a reduced run) is read from the results document.
"""

from __future__ import annotations

from typing import Any

from bench.storage.figures import SHORT


def method_lines(doc: dict[str, Any]) -> list[str]:
    """The sections after the measurements, from "How it is measured" to the harness notes."""
    m = doc["machine"]
    return [
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
        "- **Longstep**: the real runtime (`longstep.tasks.init_run.start_run`, then `model_turn` and `call_tool` for every "
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
        "`functions/*.py` build one per invocation. Storage is the same either way; with the runtime as measured, a "
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
