"""The fleet campaign's ``slots`` entry (issue 27): faults while runs wait for and hold a
concurrency slot, on a stack of its own whose key is the run's tenant, with a limit of
``LIMIT``: ``RUNS`` runs of the test-only ``fleet`` agent (``tests/fixtures/agents/fleet.py``,
two turns and one keyed ``lookup`` each) start at once under one tenant, so some hold the slots
and the others wait for them (a task token, no compute).

The faults, each once in a case:

- ``crash.slot_transaction@K``: the FleetGate invocation that commits the K-th slot transaction
  (a place filed, a slot granted, a slot given back) dies right after it, before it answers;
  Step Functions' Retry runs the task again (a new token for AcquireSlot).
- ``crash.slot_wake@K``: the FleetGate invocation about to answer the K-th waiter's token dies
  (the slot is granted, the waiter not woken).
- ``zombie.slot_transaction@K``: that invocation stalls after its transaction; the same task runs
  again meanwhile, to the end (as a retry that starts while the first still runs); then the
  stalled one goes on.
- ``lost_ack.TransactWriteItems@K``, ``lost_ack.SendTaskSuccess@K``: the response of the slot's
  K-th transaction, or of the K-th token answer, is lost (the SDK sends it again).
- crashes and zombies at a step point of a run that holds a slot (``after_model@0`` ...), and
  throttled model and tool calls (``throttle``).
- ``stop.waiter``, ``stop.holder``: StopExecution of the first run queued, or of the first run
  that ran a model turn (its end event gives the slot or the place back); ``stop.durable``:
  ``longstep stop`` of the first run queued (woken without a slot, it ends as stopped);
  ``lost_end.holder``: ``stop.holder`` with its end event lost on the bus (a full key's pump
  finds the ended holder: ``Slots.reclaim``).

Each case is checked against the clean run: every run not stopped SUCCEEDED with one
execution, a stopped run ended as asked, at no moment more than ``LIMIT`` runs of the key did
model or tool work (from the invocations: a run is busy from its first ModelTurn to its
ReleaseSlot or its end) nor held a slot, and every slot and place is free at the end.
Duplicates are counted from the agent's own ledger (``fleet.EFFECTS``), less the one retry a
crash or zombie after a call's effect explains (as the other fleet entries count them).
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator
from unittest import mock

LIMIT = 2
RUNS = 5
TENANT = "acme"
FLEET_SETTINGS = {"concurrency": {"key": "tenant", "limit": LIMIT}}
STOPS = ("stop.waiter", "stop.holder", "stop.durable", "lost_end.holder")
SLOT_FAULTS = ("crash.slot_transaction", "crash.slot_wake", "zombie.slot_transaction")


def slot_cases() -> list[dict[str, Any]]:
    """The ``slots`` entry's cases."""
    out: list[dict[str, Any]] = [{"entry": "slots", "faults": [f"crash.slot_transaction@{k}"]} for k in range(0, 14, 2)]
    out += [{"entry": "slots", "faults": [f"crash.slot_wake@{k}"]} for k in (0, 2, 4)]
    out += [{"entry": "slots", "faults": [f"zombie.slot_transaction@{k}"]} for k in (1, 4, 7, 10)]
    out += [{"entry": "slots", "faults": [f"lost_ack.TransactWriteItems@{k}"]} for k in (0, 3, 6, 9)]
    out += [{"entry": "slots", "faults": [f"lost_ack.SendTaskSuccess@{k}"]} for k in (0, 2, 4)]
    out += [{"entry": "slots", "faults": [p]} for p in ("after_model@0", "after_effect@0", "before_model@1", "zombie.after_effect@0")]
    out += [{"entry": "slots", "throttle": 0.3, "seed": seed} for seed in (1, 2)]
    out += [{"entry": "slots", "faults": [stop]} for stop in STOPS]
    return out


class _SlotFault:
    """One planned fault of the slots' own operations (``SLOT_FAULTS``), fired once."""

    def __init__(self, spec: str, stack: Any) -> None:
        self.kind, _, index = spec.partition("@")
        self.index, self.stack = int(index), stack
        self.counts = {"transaction": 0, "wake": 0}
        self.fired: list[str] = []
        self.lock = threading.Lock()
        self.current = threading.local()  # the FleetGate invocations this thread is in

    def enter(self, invocation: Any) -> None:
        if invocation.task == "fleet_gate":
            self.current.__dict__.setdefault("stack", []).append(invocation)

    def leave(self, invocation: Any) -> None:
        if invocation.task == "fleet_gate" and getattr(self.current, "stack", None):
            self.current.stack.pop()

    def reached(self, what: str) -> None:
        """A slot transaction committed, or a wake is about to be sent, in this thread."""
        invocations = getattr(self.current, "stack", None)
        if not invocations:
            return  # the campaign's own calls (``longstep stop``), not a FleetGate invocation's
        with self.lock:
            n = self.counts[what]
            self.counts[what] += 1
            if self.fired or self.kind.partition(".")[2] != f"slot_{what}" or n != self.index:
                return
            self.fired.append(f"{self.kind}@{n}")
        if self.kind.startswith("crash."):
            from longstep_kit.local.dispatch import Crash

            raise Crash(f"{self.kind}@{n}")
        from longstep_kit.local.iam import acting_as

        invocation = invocations[-1]  # a zombie: the task runs again to the end, then this one goes on
        with acting_as(None):  # Step Functions invokes it, not the stalled function's role
            self.stack.client("lambda").invoke(FunctionName=invocation.function, Payload=json.dumps(invocation.event))

    @contextmanager
    def installed(self) -> Iterator[None]:
        from longstep.concurrency import Slots

        transact, wake = Slots._transact, Slots._wake

        def _transact(slots: Any, items: list[dict[str, Any]]) -> bool:
            committed = transact(slots, items)
            if committed:
                self.reached("transaction")
            return committed

        def _wake(slots: Any, *args: Any) -> None:
            self.reached("wake")
            wake(slots, *args)

        dispatcher = self.stack.dispatcher
        dispatcher.before_invoke.append(self.enter)
        dispatcher.after_invoke.append(self.leave)
        try:
            with mock.patch.object(Slots, "_transact", _transact), mock.patch.object(Slots, "_wake", _wake):
                yield
        finally:
            dispatcher.before_invoke.remove(self.enter)
            dispatcher.after_invoke.remove(self.leave)


class _Busy:
    """The runs of the key doing work, and its holders, as the invocations go: the most of each."""

    def __init__(self, slots: Any, exempt: set[str]) -> None:
        self.slots, self.exempt = slots, exempt
        self.busy: set[str] = set()
        self.most_busy = self.most_held = 0
        self.lock = threading.Lock()

    @staticmethod
    def _run_of(invocation: Any) -> str:
        event = invocation.event if isinstance(invocation.event, dict) else {}
        if "detail" in event:  # an execution's end event
            return str(json.loads((event.get("detail") or {}).get("input") or "{}").get("run_id") or "")
        return str(event.get("run_id") or (event.get("item") or {}).get("run_id") or "")

    def before(self, invocation: Any) -> None:
        run = self._run_of(invocation)
        with self.lock:
            if invocation.task in ("model_turn", "call_tool") and run not in self.exempt:
                self.busy.add(run)
                self.most_busy = max(self.most_busy, len(self.busy))
            elif invocation.task == "fleet_gate" and (invocation.event.get("op") == "release" or "detail" in invocation.event):
                self.busy.discard(run)

    def after(self, invocation: Any) -> None:
        if invocation.task == "fleet_gate":
            state = self.slots.state(TENANT)
            with self.lock:
                self.most_held = max(self.most_held, state["running"], len(state["holders"]))


class SlotsCampaign:
    """The ``slots`` entry on a stack whose deployment has a concurrency key."""

    def __init__(self, stack: Any, case_timeout: float) -> None:
        from longstep.concurrency import Slots

        self.stack, self.timeout = stack, case_timeout
        self.sfn = stack.client("stepfunctions")
        self.slots = Slots(stack.client("dynamodb"), stack.outputs["CheckpointTableName"], self.sfn, LIMIT)
        self.cases = 0

    def run(self, case: dict[str, Any], duplicates: Callable[[set[str], dict[str, Any]], int]) -> dict[str, Any]:
        """One case; ``duplicates(run_ids, case)`` counts the ledger's repeats."""
        from longstep.steps import RecordLease
        from longstep_kit.local.faults import FaultInjector, parse_fault
        from tests.fixtures.agents import fleet

        self.stack.reset_data()
        self.stack.clock.rewind()
        fleet.EFFECTS.clear()
        self.cases += 1
        specs = case.get("faults", [])
        stop = next((s for s in specs if s in STOPS), None)
        slot_spec = next((s for s in specs if s.partition("@")[0] in SLOT_FAULTS), None)
        plan = [parse_fault(s) for s in specs if s != stop and s != slot_spec]
        injector = FaultInjector(
            plan=plan,
            lock=RecordLease,
            dispatcher=self.stack.dispatcher,
            lambda_client=lambda: self.stack.client("lambda"),
            throttle_rate=case.get("throttle", 0.0),
            seed=case.get("seed", 0),
        )
        slot_fault = _SlotFault(slot_spec or "none@-1", self.stack)
        run_ids = [f"slots-{self.cases}-{i}" for i in range(RUNS)]
        stopped: dict[str, str] = {}
        busy = _Busy(self.slots, exempt=set())
        hooks = [(self.stack.dispatcher.before_invoke, busy.before), (self.stack.dispatcher.after_invoke, busy.after)]
        if stop:
            hooks.append((self.stack.dispatcher.after_invoke, self._stopper(stop, stopped, busy)))
        for hooks_list, hook in hooks:
            hooks_list.append(hook)
        injector.install()
        try:
            with slot_fault.installed(), self._lost_end(stopped if stop == "lost_end.holder" else None):
                arns = self._start(run_ids)
                ended = {run_id: self._wait(arn) for run_id, arn in arns.items()}
                free = self._free_at_end()
        finally:
            injector.uninstall()
            for hooks_list, hook in hooks:
                hooks_list.remove(hook)
        return self._report(case, run_ids, ended, stopped, busy, free, bool(injector.injected or slot_fault.fired or injector.throttled), duplicates)

    def _report(
        self,
        case: dict[str, Any],
        run_ids: list[str],
        ended: dict[str, str],
        stopped: dict[str, str],
        busy: _Busy,
        free: bool,
        fired: bool,
        duplicates: Callable[[set[str], dict[str, Any]], int],
    ) -> dict[str, Any]:
        from longstep_kit.ops import runs as run_ops

        executions = {r: len(run_ops.run_executions(self.sfn, self.stack.state_machine_arn, r)) for r in run_ids}
        expected = {"stop.durable": "STOPPED"}.get(next(iter(case.get("faults", [])), ""), "ABORTED")
        as_asked = all(ended[r] == expected for r in stopped)
        others = all(ended[r] == "SUCCEEDED" for r in run_ids if r not in stopped)
        ok = as_asked and others and len(stopped) == (1 if set(case.get("faults", [])) & set(STOPS) else 0)
        extra = sum(n - 1 for n in executions.values() if n > 1)
        return {
            "fired": fired or bool(stopped),
            "duplicates": duplicates(set(run_ids), case) + extra,
            "status": "SUCCEEDED" if ok else json.dumps({"ended": ended, "stopped": sorted(stopped)}),
            "outcome": {
                "within_limit": busy.most_busy <= LIMIT and busy.most_held <= LIMIT,
                "limit_bound": busy.most_held == LIMIT,
                "free_at_end": free,
                "stopped_as_asked": as_asked,
                "others_succeeded": others,
            },
            "most": {"busy": busy.most_busy, "held": busy.most_held},
        }

    # -- parts ----------------------------------------------------------------------------------

    def _start(self, run_ids: list[str]) -> dict[str, str]:
        from longstep_kit.local.runner import start_input
        from longstep_kit.local.scenario import Scenario
        from tests.fixtures.agents import fleet

        arns = {}
        for run_id in run_ids:
            payload = {**start_input(self.stack, Scenario.model_validate(fleet.scenario(run_id, "us", False)), run_id), "tenant": TENANT}
            arns[run_id] = self.sfn.start_execution(stateMachineArn=self.stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
        return arns

    def _wait(self, arn: str) -> str:
        from longstep_kit.testing.wait import wait_execution

        described = wait_execution(self.sfn, arn, timeout=self.timeout)
        output = json.loads(described.get("output") or "{}") if described["status"] == "SUCCEEDED" else {}
        return "STOPPED" if output.get("status") == "STOPPED" else described["status"]

    def _free_at_end(self) -> bool:
        """Every slot and place of the key given back (end events are asynchronous: waited for)."""
        from longstep_kit.testing.wait import wait_until

        empty = {"running": 0, "limit": LIMIT, "holders": [], "waiters": []}
        try:
            wait_until("the key's slots to be free", lambda: self.slots.state(TENANT) == empty, timeout=30)
        except Exception:  # noqa: BLE001 - a leaked slot is this case's result
            return False
        return True

    def _stopper(self, stop: str, stopped: dict[str, str], busy: _Busy) -> Any:
        """The hook that stops one run where ``stop`` says, once."""
        from longstep_kit.ops.steer import Steering
        from longstep.store import CheckpointStore

        store = CheckpointStore(self.stack.outputs["CheckpointTableName"], self.stack.client("dynamodb"))

        def hook(invocation: Any) -> None:
            if stopped or not isinstance(invocation.result, dict):
                return
            run_id = str(invocation.result.get("run_id") or (invocation.event or {}).get("run_id") or "")
            queued = invocation.task == "fleet_gate" and invocation.result.get("status") == "queued"
            holding = invocation.task == "model_turn" and stop in ("stop.holder", "lost_end.holder")
            if not run_id or not (holding or (queued and stop in ("stop.waiter", "stop.durable"))):
                return
            latest = self.sfn.list_executions(stateMachineArn=self.stack.state_machine_arn, statusFilter="RUNNING")["executions"]
            arn = next((e["executionArn"] for e in latest if e["name"] == run_id), None)
            if arn is None:
                return
            stopped[run_id] = arn
            if stop == "stop.durable":
                busy.exempt.add(run_id)  # woken without a slot: its last model turn only ends it
                Steering(store, self.sfn, self.stack.state_machine_arn).stop(run_id, "the campaign stops a waiting run")
            else:
                self.sfn.stop_execution(executionArn=arn, error="Campaign", cause=stop)
                with busy.lock:
                    busy.busy.discard(run_id)  # aborted: it does no more work, whether its end event arrives or not

        return hook

    @contextmanager
    def _lost_end(self, stopped: dict[str, str] | None) -> Iterator[None]:
        """The end events of the stopped runs never reach the rule's target (best effort)."""
        if stopped is None:
            yield
            return
        from moto.events.models import Rule

        deliver = Rule.send_to_targets

        def send_to_targets(rule: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
            if (event.get("detail") or {}).get("executionArn") in stopped.values():
                return None
            return deliver(rule, event, *args, **kwargs)

        with mock.patch.object(Rule, "send_to_targets", send_to_targets):
            yield
