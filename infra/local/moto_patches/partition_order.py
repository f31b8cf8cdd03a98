"""A DynamoDB partition's items in sort-key order, kept between Queries while the partition grows.

The Query patch (``dynamodb.dynamodb_query_reads_one_partition``) sorted every item of the
queried partition on each call, and a run's partition holds every record of the run: its event
log, step records and snapshots. A run mostly adds records and queries after each addition, so
here the order is kept per partition and brought up to date with the keys added since (each
put at its place by bisection), and sorted afresh when a key has gone (a delete, a TTL expiry).

moto keeps a partition as a dict from range key to item: a new key goes to the dict's end, and a
put over an existing key keeps the key object in place (only the item changes). So the dict's
key objects, in order, tell whether keys were only added since the order was taken (the old
keys are the new keys' prefix), and the items are read from the dict on each call.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import Any

# Partitions whose order is kept (a run's partition per table, a few tables): least recently
# queried dropped first. An entry holds its partition, so the partition's id stays its own.
_KEPT = 64
_orders: OrderedDict[int, "_Order"] = OrderedDict()


class _Order:
    """One partition's range keys (dict order), their sort values in order, and their places."""

    def __init__(self, partition: dict[Any, Any]) -> None:
        self.partition = partition
        self.keys: list[Any] = list(partition)
        values = [sort_value(key) for key in self.keys]
        # A stable sort of the places on their values: moto's order (``sorted`` on the key).
        self.places = sorted(range(len(values)), key=values.__getitem__)
        self.sorted_values = [values[i] for i in self.places]

    def catch_up(self, keys: list[Any]) -> bool:
        """Take the keys added at the end since; False if any other change was made."""
        known = len(self.keys)
        if len(keys) < known or keys[:known] != self.keys:
            return False
        for place in range(known, len(keys)):
            value = sort_value(keys[place])
            # After its equals: a stable sort keeps dict order among equal values.
            at = bisect.bisect_right(self.sorted_values, value)
            self.sorted_values.insert(at, value)
            self.places.insert(at, place)
        self.keys = keys
        return True


def sort_value(key: Any) -> Any:
    """``key.cast_value`` (a string key's is its ``value``: read directly, it is most keys)."""
    return key.value if key.type == "S" else key.cast_value


def ordered(partition: dict[Any, Any]) -> tuple[list[Any], list[int], list[Any]]:
    """The partition's sort values in order, the dict place of each, and its items in dict order.

    Must be called under the lock moto's DynamoDB operations run under (the Query patch holds
    it): the kept order is read and updated here.
    """
    keys = list(partition)
    order = _orders.get(id(partition))
    if order is None or order.partition is not partition or not order.catch_up(keys):
        order = _orders[id(partition)] = _Order(partition)
    _orders.move_to_end(id(partition))
    while len(_orders) > _KEPT:
        _orders.popitem(last=False)
    return order.sorted_values, order.places, list(partition.values())


def forget() -> None:
    """Drop every kept order (the local stack's data was reset; tests)."""
    _orders.clear()
