"""Concurrency keys: at most N running runs per key, the others waiting their turn on a task token.

A run's key is one attribute of its record (``tenant``, ``agent``...: ``FleetSettings.key``). Per
key, in the checkpoint table (partition ``fleet#<key>``, no TTL: a key's items live as long as
its runs use them):

- ``slots``: the counter (``running``), the live limit when one was set (``limit``, else the
  deployment's), and the arrival sequence (``arrivals``);
- ``holder#<run_id>``: a run holding a slot: its execution, the task token to wake, whether it
  was woken and when its execution was last checked; ``waiter#<arrival>`` and
  ``queued#<run_id>`` (its place): a run waiting, in arrival order.

Every change is one DynamoDB transaction with conditions (the counter below the limit, the waiter
still there, the holder not yet there), so concurrent acquires, releases and wakes never let a key
go over its limit or lose a waiter: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html.
Whoever frees a slot or adds a waiter then *pumps* the key (grants the head waiters while the
counter is below the limit and wakes them with SendTaskSuccess), so a slot is never idle while a
run waits, and a full key with a run waiting frees the slots of holders that ended unseen. Each
key has its own queue (a busy key never takes another's slots); within a key, arrival order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Mapping

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from longstep import clock, keys
from longstep.humans.signals import dead_token

KEY_PREFIX = "fleet#"
SLOTS = "slots"
HOLDER, WAITER, QUEUED = "holder#", "waiter#", "queued#"
NO_KEY = "-"  # the key of a run without the attribute
_TRIES = 20
RECLAIM_CHECKS = 2  # holders whose execution one pump may ask about
# A holder's execution statuses that keep its slot: https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html
_KEEPS = ("RUNNING", "SUCCEEDED", "PENDING_REDRIVE")
_SK = keys.checkpoint_table().sort_key
_ABSENT, _PRESENT = f"attribute_not_exists({_SK})", f"attribute_exists({_SK})"
_ser, _de = TypeSerializer(), TypeDeserializer()


def key_of(run: Mapping[str, Any], attribute: str) -> str:
    """The run's concurrency key: its ``attribute`` (``NO_KEY`` when it has none)."""
    value = run.get(attribute)
    return str(value) if isinstance(value, str) and value else NO_KEY


@dataclass
class Slots:
    """The slots of the concurrency keys, in the checkpoint table.

    Attributes:
        client: a DynamoDB client.
        table: the checkpoint table.
        sfn: a Step Functions client (wakes waiters; reads a woken waiter's execution).
        default_limit: a key's limit until one is set live (``set_limit``).
    """

    client: Any
    table: str
    sfn: Any
    default_limit: int
    on_wake: Callable[[str, str], None] | None = None  # tests: (key, run_id) of each wake

    def __post_init__(self) -> None:
        self.woke: list[str] = []  # the runs this instance woke (a task reports them)

    # Items -------------------------------------------------------------------------------------

    def _key(self, key: str, sk: str) -> dict[str, Any]:
        schema = keys.checkpoint_table()
        return {schema.partition_key: {"S": KEY_PREFIX + key}, schema.sort_key: {"S": sk}}

    def _get(self, key: str, sk: str) -> dict[str, Any] | None:
        item = self.client.get_item(TableName=self.table, Key=self._key(key, sk), ConsistentRead=True).get("Item")
        return {k: _de.deserialize(v) for k, v in item.items()} if item else None

    def _query(self, key: str, prefix: str, limit: int | None = None) -> list[dict[str, Any]]:
        schema = keys.checkpoint_table()
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": schema.partition_key, "#sk": schema.sort_key},
            "ExpressionAttributeValues": {":pk": {"S": KEY_PREFIX + key}, ":prefix": {"S": prefix}},
            "ConsistentRead": True,
            **({} if limit is None else {"Limit": limit}),
        }
        items = self.client.query(**kwargs).get("Items", [])
        return [{k: _de.deserialize(v) for k, v in item.items()} for item in items]

    def _item(self, key: str, sk: str, attrs: dict[str, Any]) -> dict[str, Any]:
        return {**self._key(key, sk), **{k: _ser.serialize(v) for k, v in attrs.items() if v is not None}}

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        """One transaction; False when a condition failed (nothing was written)."""
        try:
            self.client.transact_write_items(TransactItems=items)
        except self.client.exceptions.TransactionCanceledException:
            return False
        return True

    def state(self, key: str) -> dict[str, Any]:
        """The key's counter, limit, holders and waiters (in arrival order)."""
        slots = self._get(key, SLOTS) or {}
        return {
            "running": int(slots.get("running", 0)),
            "limit": self.limit_of(slots),
            "holders": sorted(h["run_id"] for h in self._query(key, HOLDER)),
            "waiters": [w["run_id"] for w in self._query(key, WAITER)],
        }

    def limit_of(self, slots: dict[str, Any]) -> int:
        return int(slots["limit"]) if "limit" in slots else self.default_limit

    # Operations --------------------------------------------------------------------------------

    def acquire(self, key: str, run_id: str, execution: str, token: str) -> str:
        """Queue the run for a slot of ``key`` (or hand its slot to ``token`` when it holds one:
        a continued execution of the run, a retried acquire); returns ``held`` or ``queued``.

        Either way the token is answered (SendTaskSuccess) once the run holds the slot: at once,
        or when a slot frees up.
        """
        holder = self._get(key, HOLDER + run_id)
        if holder is not None:
            self._update_holder(key, run_id, execution, token)
            self._wake(key, run_id, token, execution)
            return "held"
        queued = self._get(key, QUEUED + run_id)
        # A transaction is also cancelled when another one touches its items at the same moment
        # (TransactionConflict): try again under a new arrival until the place is filed.
        for _ in range(_TRIES):
            if queued is not None:
                break
            place = f"{WAITER}{self._next_arrival(key):012d}"
            waiter = {"run_id": run_id, "execution": execution, "token": token, "queued_at": Decimal(repr(clock.now()))}
            filed = self._transact(
                [
                    {"Put": {"TableName": self.table, "Item": self._item(key, place, waiter), "ConditionExpression": _ABSENT}},
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._item(key, QUEUED + run_id, {"place": place}),
                            "ConditionExpression": _ABSENT,
                        }
                    },
                ]
            )
            if filed:
                break
            queued = self._get(key, QUEUED + run_id)
        if queued is not None and self._get(key, queued["place"]) is not None:
            # Already waiting (a retried acquire, a continued execution): the newest token waits.
            # (Granted meanwhile, it is not updated: the holder's token is answered below.)
            self._set(key, queued["place"], {"token": {"S": token}, "execution": {"S": execution}})
        holder = self._get(key, HOLDER + run_id)
        if holder is not None and holder.get("token") != token:
            self._update_holder(key, run_id, execution, token)
        self.pump(key)
        return "held" if self._get(key, HOLDER + run_id) is not None else "queued"

    def release(self, key: str, run_id: str, execution: str | None = None) -> bool:
        """Give back the run's slot (or its place in the queue), then wake the next waiters.

        Args:
            execution: only if this execution holds it (an ended execution's event must not
                release a slot its run's next execution took over); None: whichever.

        Returns:
            Whether a slot or a place was given back (False: nothing held; idempotent).
        """
        released = False
        for _ in range(_TRIES):
            holder = self._get(key, HOLDER + run_id)
            if holder is not None and (execution is None or holder.get("execution") == execution):
                if self._drop_holder(key, run_id, holder):
                    released = True
                    break
                continue
            queued = self._get(key, QUEUED + run_id)
            if queued is None:
                break
            waiter = self._get(key, queued["place"]) or {}
            if execution is not None and waiter.get("execution") not in (None, execution):
                break
            if self._transact([self._delete(key, queued["place"], waiter.get("token")), self._delete(key, QUEUED + run_id)]):
                released = True
                break
        self.pump(key)
        return released

    def wake_stopped(self, run: dict[str, Any], run_id: str) -> bool:
        """A run stopped (``longstep stop``) while it waits for a slot leaves the queue and is
        woken without one: it reaches its next model turn, which ends it as stopped. The run's key
        is not known here (it is the deployment's setting), so each attribute a key may be is
        tried. Returns whether it was waiting."""
        for key in dict.fromkeys(key_of(run, attribute) for attribute in ("tenant", "agent")):
            queued = self._get(key, QUEUED + run_id)
            waiter = self._get(key, queued["place"]) if queued else None
            if waiter is None:
                continue
            if self._transact([self._delete(key, queued["place"], waiter["token"]), self._delete(key, QUEUED + run_id)]):
                try:
                    self.sfn.send_task_success(taskToken=waiter["token"], output=json.dumps({"slot": None, "run_id": run_id}))
                except Exception as exc:
                    if not dead_token(exc):
                        raise
                return True
        return False

    def set_limit(self, key: str, limit: int) -> None:
        """Set the key's limit live (each acquire and wake reads it), then wake who now fits."""
        self.client.update_item(
            TableName=self.table,
            Key=self._key(key, SLOTS),
            UpdateExpression="SET #limit = :limit",
            ExpressionAttributeNames={"#limit": "limit"},
            ExpressionAttributeValues={":limit": {"N": str(limit)}},
        )
        self.pump(key)

    def pump(self, key: str) -> int:
        """Grant the head waiters while the key is under its limit, and wake them; also wake a
        holder a crash left unwoken, and free the slots of holders that ended (``reclaim``).
        Returns how many were granted."""
        for holder in self._query(key, HOLDER):
            if not holder.get("woken"):
                self._wake(key, holder["run_id"], holder["token"], holder.get("execution", ""))
        granted = self._grant(key)
        if self.reclaim(key):
            granted += self._grant(key)
        return granted

    def reclaim(self, key: str) -> int:
        """Free the slots of holders whose execution failed, timed out or was aborted unseen (end
        events are best effort: https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html;
        one that succeeded is handing over to its next execution). Only when the key is full
        while a run waits, at most ``RECLAIM_CHECKS`` holders a time, the one checked (or granted)
        longest ago first: DescribeExecution is throttled per account
        (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html). Returns how many were freed."""
        slots = self._get(key, SLOTS) or {}
        if int(slots.get("running", 0)) < self.limit_of(slots) or not self._query(key, WAITER, limit=1):
            return 0
        holders = sorted(self._query(key, HOLDER), key=lambda h: (h.get("checked_at", h.get("since", 0)), h[_SK]))
        freed = 0
        for holder in holders[:RECLAIM_CHECKS]:
            execution = str(holder.get("execution") or "")
            if not execution.startswith("arn:"):
                continue  # not a known execution: nothing to ask about
            try:
                status = self._status(execution)
            except ClientError:  # throttled or refused: a later pump checks again
                break
            if status in _KEEPS:
                self._set(key, HOLDER + holder["run_id"], {"checked_at": {"N": repr(clock.now())}}, holder["token"])
            else:
                freed += self._drop_holder(key, holder["run_id"], holder)
        return freed

    def _grant(self, key: str) -> int:
        """Grant the head waiters while the key is under its limit, and wake them."""
        granted = 0
        for _ in range(_TRIES * 10):
            slots = self._get(key, SLOTS) or {}
            running, limit = int(slots.get("running", 0)), self.limit_of(slots)
            if running >= limit:
                break
            head = self._query(key, WAITER, limit=1)
            if not head:
                break
            waiter = head[0]
            holder = {
                "run_id": waiter["run_id"],
                "execution": waiter["execution"],
                "token": waiter["token"],
                "woken": False,
                "since": Decimal(repr(clock.now())),
            }
            ok = self._transact(
                [
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": self._key(key, SLOTS),
                            "UpdateExpression": "SET #running = if_not_exists(#running, :zero) + :one",
                            "ConditionExpression": "attribute_not_exists(#running) OR #running < :limit",
                            "ExpressionAttributeNames": {"#running": "running"},
                            "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}, ":limit": {"N": str(limit)}},
                        }
                    },
                    self._delete(key, waiter[_SK], waiter["token"]),
                    self._delete(key, QUEUED + waiter["run_id"]),
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._item(key, HOLDER + waiter["run_id"], holder),
                            "ConditionExpression": _ABSENT,
                        }
                    },
                ]
            )
            if ok:
                granted += 1
                self._wake(key, waiter["run_id"], waiter["token"], waiter["execution"])
        return granted

    # Parts ----------------------------------------------------------------------------------------

    def _next_arrival(self, key: str) -> int:
        out = self.client.update_item(
            TableName=self.table,
            Key=self._key(key, SLOTS),
            UpdateExpression="SET #arrivals = if_not_exists(#arrivals, :zero) + :one",
            ExpressionAttributeNames={"#arrivals": "arrivals"},
            ExpressionAttributeValues={":zero": {"N": "0"}, ":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(out["Attributes"]["arrivals"]["N"])

    def _delete(self, key: str, sk: str, token: str | None = None) -> dict[str, Any]:
        delete: dict[str, Any] = {"TableName": self.table, "Key": self._key(key, sk), "ConditionExpression": _PRESENT}
        if token is not None:  # the item as read (a newer token means someone changed it)
            delete["ConditionExpression"] += " AND #token = :token"
            delete["ExpressionAttributeNames"] = {"#token": "token"}
            delete["ExpressionAttributeValues"] = {":token": {"S": token}}
        return {"Delete": delete}

    def _drop_holder(self, key: str, run_id: str, holder: dict[str, Any]) -> bool:
        return self._transact(
            [
                self._delete(key, HOLDER + run_id, holder["token"]),
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": self._key(key, SLOTS),
                        "UpdateExpression": "SET #running = #running - :one",
                        "ConditionExpression": "#running > :zero",
                        "ExpressionAttributeNames": {"#running": "running"},
                        "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}},
                    }
                },
            ]
        )

    def _update_holder(self, key: str, run_id: str, execution: str, token: str) -> None:
        values = {"token": {"S": token}, "execution": {"S": execution}, "woken": {"BOOL": False}}
        self._set(key, HOLDER + run_id, values, strict=True)  # gone meanwhile: the task is retried

    def _wake(self, key: str, run_id: str, token: str, execution: str) -> None:
        """SendTaskSuccess to the holder's token, then mark it woken. A token Step Functions
        refuses (its task is over: https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html)
        whose execution is no longer running gives the slot back: that execution will never use it."""
        try:
            self.sfn.send_task_success(taskToken=token, output=json.dumps({"slot": key, "run_id": run_id}))
        except Exception as exc:
            if not dead_token(exc):
                raise
            if self._status(execution) != "RUNNING":
                holder = self._get(key, HOLDER + run_id)
                if holder is not None and holder.get("token") == token:
                    self._drop_holder(key, run_id, holder)
                return
        else:
            self.woke.append(run_id)
            if self.on_wake is not None:
                self.on_wake(key, run_id)
        self._set(key, HOLDER + run_id, {"woken": {"BOOL": True}}, token)

    def _set(self, key: str, sk: str, values: dict[str, dict[str, Any]], token: str | None = None, strict: bool = False) -> None:
        """Set attributes of an item if it is still there (and still has ``token``, when given);
        ``strict``: raise ConditionalCheckFailedException when it is not."""
        names = {f"#a{i}": name for i, name in enumerate(values)}
        kwargs: dict[str, Any] = {
            "UpdateExpression": "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
            "ExpressionAttributeValues": {f":v{i}": v for i, v in enumerate(values.values())},
            "ConditionExpression": _PRESENT,
        }
        if token is not None:
            kwargs["ConditionExpression"] += " AND #token = :token"
            names["#token"], kwargs["ExpressionAttributeValues"][":token"] = "token", {"S": token}
        try:
            self.client.update_item(TableName=self.table, Key=self._key(key, sk), ExpressionAttributeNames=names, **kwargs)
        except self.client.exceptions.ConditionalCheckFailedException:
            if strict:
                raise  # released, granted or handed to a newer token meanwhile

    def _status(self, execution: str) -> str:
        """The execution's status (``GONE``: there is no such execution)."""
        if not execution.startswith("arn:"):
            return "GONE"
        try:
            return self.sfn.describe_execution(executionArn=execution)["status"]
        except self.sfn.exceptions.ExecutionDoesNotExist:
            return "GONE"
