"""Longstep: the real runtime, driven on moto exactly as the state machine drives it.

Nothing of Longstep's storage is reimplemented here. The bench builds a ``Runtime`` the way a
Lambda handler does (``Runtime.from_env``: ``CheckpointStore``, ``ArtifactStore``,
``PowertoolsStepLock`` on the idempotency table, tables created from ``longstep.keys``), gives it
an agent whose tools return the session's outputs and a ``ScriptedProvider`` (through
``Runtime.model_override``) that replays the session's model messages, then calls
``longstep.tasks.init_run.start_run`` once and ``model_turn`` / ``call_tool`` for every turn, with one
``Runtime`` per Lambda function (a warm container each). Whatever the runtime stores (deltas,
snapshots, offloaded artifacts, idempotency records...) is what gets counted.

The resume cost is measured in a cold "container": every ``longstep`` module is imported afresh,
so no cache a warm invocation may keep is reused. What a resume reads is :func:`resume_context`,
kept as one small function so it can follow the runtime's API. It is measured at every turn too,
as the run goes (:class:`EveryTurn`: before each model turn, with the context cache emptied, on
clients of its own), so the figure covers the turns just after and just before a snapshot alike.
"""

import importlib
import json
import sys
from typing import Any

import boto3

from bench.storage.aws import Meter, inventory
from bench.storage.systems.longstep_agent import AGENT, build_agent, script
from bench.storage.session import Session

RUN_ID = "bench-run"
ARTIFACT_BUCKET = "longstep-artifacts-bench"
FIXTURES_BUCKET = "longstep-bench-fixtures"  # holds the model script; not part of Longstep's storage
TABLE_PREFIX = "longstep-"


def resume_context(rt: Any, run_id: str, turn: int) -> list[dict[str, Any]]:
    """What a cold ModelTurn of ``turn`` loads to build the messages the model is given.

    Uses the runtime's context loader (``longstep.context.load``: snapshot + deltas) when it has
    one, else rebuilds the transcript from every recorded step (the runtime before delta
    checkpoints). Switch this one function when the runtime's API moves again.
    """
    from longstep import context
    from longstep.tasks.common import load_run

    run = load_run(rt, run_id)
    return context.load(rt.store, rt.artifacts, run_id, run, turn).messages(turn)


class EveryTurn:
    """A cold resume before every model turn: what a container that has never seen the run reads.

    It reads through clients of its own (its own meter, so the run's request counts stay the
    run's) and puts the warm cache back afterwards, so the run goes on as it would have.
    """

    def __init__(self, settings: Any) -> None:
        from longstep.artifacts import ArtifactStore
        from longstep.store import CheckpointStore

        self.meter = Meter()
        ddb = self.meter.attach(boto3.client("dynamodb"))
        s3 = self.meter.attach(boto3.client("s3"))
        self.rt = type("ColdReader", (), {})()
        self.rt.store = CheckpointStore(settings.checkpoint_table, ddb)
        self.rt.artifacts = ArtifactStore(settings.artifact_bucket, s3)
        try:  # a runtime with run event streams: a reader emits nothing
            from longstep.events import Emitter

            self.rt.events = Emitter(None)
        except ImportError:
            pass
        self.by_turn: list[dict[str, Any]] = []

    def measure(self, run_id: str, turn: int) -> None:
        from longstep import context

        if self.by_turn and self.by_turn[-1]["turn"] == turn:  # the same turn again after ContinueAsNew
            return
        saved = dict(getattr(context, "_cache", {}))
        context.forget_cache()
        self.meter.reset()
        resume_context(self.rt, run_id, turn)
        cost = self.meter.snapshot()
        self.by_turn.append({"turn": turn, **{k: cost[k] for k in ("requests", "items_read", "bytes_read")}})
        context.forget_cache()
        if hasattr(context, "_cache"):
            context._cache.update(saved)

    def summary(self) -> dict[str, Any]:
        """The distribution over turns: how many turns needed each number of requests, and the peaks."""
        requests: dict[str, int] = {}
        for row in self.by_turn:
            requests[str(row["requests"])] = requests.get(str(row["requests"]), 0) + 1
        return {
            "turns_measured": len(self.by_turn),
            "turns_by_requests": dict(sorted(requests.items(), key=lambda kv: int(kv[0]))),
            "max_requests": max(r["requests"] for r in self.by_turn),
            "max_items_read": max(r["items_read"] for r in self.by_turn),
            "max_bytes_read": max(r["bytes_read"] for r in self.by_turn),
            "mean_bytes_read": round(sum(r["bytes_read"] for r in self.by_turn) / len(self.by_turn)),
            "requests_by_turn": runs_of([(r["turn"], r["requests"]) for r in self.by_turn]),
        }


def runs_of(values: list[tuple[int, int]]) -> list[list[int]]:
    """``(turn, value)`` pairs in turn order as ``[first turn, last turn, value]`` runs: the value
    at every turn, kept short in the results file."""
    out: list[list[int]] = []
    for turn, value in values:
        if out and out[-1][2] == value and out[-1][1] == turn - 1:
            out[-1][1] = turn
        else:
            out.append([turn, turn, value])
    return out


class MeasuredModel:
    """Wraps the scripted provider and records the size of the messages each model call is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[int, int]] = []  # (turn, bytes of the messages' JSON)

    def converse(self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], turn: int, **kwargs: Any) -> Any:
        size = len(json.dumps(messages, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        self.calls.append((turn, size))
        return self.inner.converse(system=system, messages=messages, tools=tools, turn=turn, **kwargs)

    def __getattr__(self, name: str) -> Any:  # anything else the runtime asks of a provider
        return getattr(self.inner, name)


class FakeContext:
    function_name = "bench-longstep"
    aws_request_id = "bench"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-longstep"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


# -- the stack ----------------------------------------------------------------------------------


def _create_stack(ddb: Any, s3: Any, environ: dict[str, str]) -> tuple[list[str], list[str]]:
    """Every table the runtime's settings name (schemas from ``longstep.keys``) and the bucket."""
    from longstep import keys, settings

    tables = []
    for const in sorted(dir(settings)):
        if not (const.startswith("ENV_") and const.endswith("_TABLE")):
            continue
        base = const[len("ENV_") : -len("_TABLE")].lower()
        schema_fn = getattr(keys, f"{base}_table", None)
        if schema_fn is None:
            raise RuntimeError(f"longstep.settings.{const} names a table but longstep.keys has no {base}_table()")
        schema = schema_fn()
        name = f"{TABLE_PREFIX}{base}"
        if hasattr(schema, "create_table_arguments"):  # indexes included
            ddb.create_table(TableName=name, **schema.create_table_arguments())
        else:
            ddb.create_table(
                TableName=name,
                KeySchema=schema.key_schema(),
                AttributeDefinitions=schema.attribute_definitions(),
                BillingMode="PAY_PER_REQUEST",
            )
        environ[getattr(settings, const)] = name
        tables.append(name)
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    environ[settings.ENV_ARTIFACT_BUCKET] = ARTIFACT_BUCKET
    return tables, [ARTIFACT_BUCKET]


def _purge_longstep() -> None:
    """Forget every imported ``longstep`` module: the next import is a cold container's."""
    for name in list(sys.modules):
        if name == "longstep" or name.startswith("longstep."):
            del sys.modules[name]
    importlib.invalidate_caches()


class PayloadLimit:
    """AWS's limits on what the state machine would carry, checked on every handler's answer.

    The bench calls the handlers in-process (no state machine): each answer would be a Lambda
    response and the task state's output, and each run or ContinueAsNew input an execution's
    input. Step Functions fails a state output or an execution input above 256 KiB
    (``States.DataLimitExceeded``; https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html),
    so the run fails here as it would there. DynamoDB's 400 KB item limit is moto's own check
    (``fastmoto`` changes only how responses are written).
    """

    def __init__(self) -> None:
        from longstep_kit.local.limits import MAX_PAYLOAD_BYTES

        self.limit = MAX_PAYLOAD_BYTES
        self.largest: dict[str, int] = {}

    def _check(self, where: str, value: Any) -> Any:
        size = len(json.dumps(value).encode("utf-8"))
        self.largest[where] = max(size, self.largest.get(where, 0))
        if size > self.limit:
            raise AssertionError(f"States.DataLimitExceeded: {where} is {size:,} bytes, over the {self.limit:,}-byte limit")
        return value

    def input(self, value: dict[str, Any]) -> dict[str, Any]:
        return self._check("execution input", value)

    def output(self, task: str, value: dict[str, Any]) -> dict[str, Any]:
        return self._check(f"{task} output", value)

    def summary(self) -> dict[str, Any]:
        return {"limit_bytes": self.limit, "largest_bytes": dict(sorted(self.largest.items())), "exceeded": False}


def run(session: Session, meter: Meter) -> dict[str, Any]:
    import os

    _purge_longstep()
    from longstep import clients
    from longstep.tasks.model_turn import model_turn
    from longstep.tasks.init_run import start_run
    from longstep.tasks.call_tool import call_tool
    from longstep.errors import UnknownAgentError
    from longstep.models.scripted import ScriptedProvider
    from longstep.runtime import Runtime

    clients.reset()
    ddb = boto3.client("dynamodb")
    s3 = boto3.client("s3")
    tables, buckets = _create_stack(ddb, s3, os.environ)
    s3.create_bucket(Bucket=FIXTURES_BUCKET)
    document = json.dumps(script(session))
    s3.put_object(Bucket=FIXTURES_BUCKET, Key="script.json", Body=document.encode("utf-8"))
    meter.attach(clients.client("dynamodb"))
    meter.attach(clients.client("s3"))

    agent = build_agent(session)
    model = MeasuredModel(ScriptedProvider.from_json(document))

    def resolve(name: str) -> Any:
        if name != AGENT:
            raise UnknownAgentError(f"agent: unknown agent {name!r}; registered agents: {AGENT}")
        return agent

    def runtime() -> Any:
        rt = Runtime.from_env(resolve, FakeContext())
        rt.model_override = model
        return rt

    # One warm container per Lambda function for the whole run. (functions/*.py build a Runtime
    # per invocation; with the shared cached client that adds one Powertools user-agent hook per
    # invocation, so every request of a long run would run thousands of hooks: see RESULTS.md.)
    init_rt, model_rt, tool_rt = runtime(), runtime(), runtime()
    every_turn = EveryTurn(model_rt.settings)

    start = {
        "run_id": RUN_ID,
        "goal": session.goal,
        "agent": AGENT,
        "max_turns": len(session.turns) + 1,
        "model": {"provider": "scripted", "script_uri": f"s3://{FIXTURES_BUCKET}/script.json"},
    }
    payloads = PayloadLimit()
    cursor = payloads.output("Init", start_run(init_rt, payloads.input(start)))
    turns = generations = 0
    while True:
        every_turn.measure(RUN_ID, cursor["next_turn"])
        out = payloads.output("ModelTurn", model_turn(model_rt, cursor))
        if out["route"] == "continue":
            # ContinueAsNew: the next execution of the run starts with this input, and its Init
            # finds where to resume.
            generations += 1
            cursor = payloads.output("Init", start_run(init_rt, payloads.input({**start, "generation": int(out.get("generation", 0)) + 1})))
            continue
        turns += 1
        if out["route"] == "done":
            break
        if out["route"] not in ("tools", "tool"):
            raise AssertionError(f"turn {out.get('turn')}: unexpected route {out['route']!r}")
        for call in out["calls"]:
            payloads.output("CallTool", call_tool(tool_rt, dict(call)))
        cursor = out
    if turns != len(session.turns) or out.get("stop") != "end_turn":
        raise AssertionError(f"Longstep ran {turns} turns (stop {out.get('stop')!r}), the session has {len(session.turns)}")
    settings = model_rt.settings
    run_requests = meter.snapshot()

    stored = inventory(ddb, s3, tables, buckets)

    # Resume at the last turn, cold.
    _purge_longstep()
    from longstep import clients as cold_clients
    from longstep.runtime import Runtime as ColdRuntime

    cold_clients.reset()
    cold_agent = build_agent(session)
    rt = ColdRuntime.from_env(lambda name: cold_agent, FakeContext())
    rt.model_override = model
    meter.attach(cold_clients.client("dynamodb"))
    meter.attach(cold_clients.client("s3"))
    meter.reset()
    last_turn = len(session.turns) - 1
    messages = resume_context(rt, RUN_ID, last_turn)
    cost = meter.snapshot()
    if not messages:
        raise AssertionError("Longstep resume rebuilt no context")
    # The full transcript up to the last turn has this many messages; a runtime that compresses
    # history gives fewer.
    transcript_messages = 1 + sum(1 + (1 if t.calls else 0) for t in session.turns[:-1])

    sizes = [size for _, size in model.calls]
    budget = getattr(settings, "context_budget_tokens", None)
    max_bytes = max(sizes)
    return {
        "payload_limit": payloads.summary(),
        "stored": stored,
        "resume": cost,
        "resume_every_turn": every_turn.summary(),
        "run_requests": run_requests,
        "context": {
            "max_context_tokens": max_bytes // 4,
            "max_context_turn": model.calls[sizes.index(max_bytes)][0],
            "last_turn_context_tokens": sizes[-1] // 4,
            "budget_tokens": budget,
            "over_budget_calls": None if budget is None else sum(1 for s in sizes if s // 4 > budget),
            "model_calls": len(model.calls),
        },
        "details": {
            "offload_threshold_bytes": getattr(settings, "offload_threshold_bytes", None),
            "snapshot_every": getattr(settings, "snapshot_every", None),
            "keep_recent_turns": getattr(settings, "keep_recent_turns", None),
            "turns_per_execution": getattr(settings, "turns_per_execution", None),
            "continued_as_new": generations,
            "summaries": getattr(model.inner, "summaries", None),
            "resume_function": f"{resume_context.__module__}.resume_context",
            "resume_messages": len(messages),
            "transcript_messages": transcript_messages,
        },
    }
