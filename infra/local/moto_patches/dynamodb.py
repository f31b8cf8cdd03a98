"""moto's DynamoDB: atomic writes, a Query that reads one partition, and the response serializer."""

from __future__ import annotations

from typing import Any

from longstep_kit.local.moto_patches.registry import fidelity, speed, patch

# -- atomic DynamoDB -----------------------------------------------------------------------------


@fidelity("https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html#WorkingWithItems.ConditionalUpdate")
def dynamodb_atomic(lock: Any, operations: tuple[str, ...]) -> None:
    """Wrap moto's DynamoDB ``operations`` in ``lock`` (idempotent: a locked one is left alone).

    Keeps identical: each operation's arguments, result and errors; only concurrent calls are
    serialized, as DynamoDB applies a conditional write atomically.
    """
    from moto.dynamodb.models import DynamoDBBackend

    for name in operations:
        method = getattr(DynamoDBBackend, name)
        if getattr(method, "__longstep_locked__", False):
            continue

        def locked(*args: Any, __method: Any = method, **kwargs: Any) -> Any:
            with lock:
                return __method(*args, **kwargs)

        locked.__longstep_locked__ = True  # type: ignore[attr-defined]
        locked.__wrapped__ = method  # type: ignore[attr-defined]
        patch(DynamoDBBackend, name, locked)


# -- DynamoDB Query on a table's own key -------------------------------------------------------


@speed
def dynamodb_query_reads_one_partition(lock: Any) -> None:
    """A Query on a table's own key reads the items of its partition, not the whole table.

    moto's ``Table.query`` starts from ``all_items()``, which collects and sorts every item of the
    table, then keeps those of the queried partition and computes the size of each, matching or
    not: a Query costs O(table), and a long run's checkpoint reads grow with every turn. DynamoDB
    reads the partition's items in sort-key order, from the key condition on
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.html). Here, for a
    Query on the table's own key (no index), moto's query runs on the partition's items that
    satisfy the sort-key condition (a contiguous run in sort-key order: every key condition is a
    range) and the item just before and just after that run (moto looks one item past the last
    match to decide on ``LastEvaluatedKey``). Keeps identical: moto's own query code for the
    rest (sort order, ``ScanIndexForward``, ``ExclusiveStartKey``, ``Limit``, filter and
    projection expressions, the scanned count, ``LastEvaluatedKey``) and every Query on an
    index. Differs only where moto differed from DynamoDB: an item outside the key condition
    further away no longer ends a page that is within that item's size of 1 MB.

    A first page with a ``Limit`` (no ``ExclusiveStartKey``, no legacy ``QueryFilter``) gets
    only the items moto looks at before it stops: the ``Limit`` matches nearest the start (the
    end when ``ScanIndexForward`` is false), the neighbour before them and the one item after
    them whose presence makes moto return ``LastEvaluatedKey``. moto stops at that item, so
    what it answers is the same; a run's event-log tail (newest first, ``Limit`` 1) no longer
    sorts and walks every event of the run. (``FilterExpression`` applies after ``Limit`` in
    moto as in DynamoDB, so it does not change which items are looked at.)

    Args:
        lock: the lock moto's DynamoDB operations run under (``atomicity.dynamodb_lock()``): the
            table's item listing is swapped for this call only.
    """
    import inspect

    from moto.dynamodb.models.table import Table

    original = Table.query
    signature = inspect.signature(original)

    def query(table: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(table, *args, **kwargs)
        call = bound.arguments
        if call.get("index_name"):  # (hash_key_conditions and range_key_conditions serve indexes only)
            return original(table, *args, **kwargs)
        hash_key, comparison, values = call.get("hash_key"), call.get("range_comparison"), call.get("range_objs") or []
        with lock:
            partition = table.items.get(hash_key) if hash_key is not None else None  # .get: items is a defaultdict
            if partition is None:
                candidates = []
            elif table.range_key_attr:
                first_page = call.get("limit") and not call.get("exclusive_start_key") and not call.get("filter_kwargs")
                page = (call["limit"], call.get("scan_index_forward") is not False) if first_page else None
                candidates = _matching_run(partition, comparison, values, page)
            else:
                candidates = [partition]
            table.all_items = lambda: candidates  # moto's query keeps those of this hash key, sorts, pages
            try:
                return original(table, *args, **kwargs)
            finally:
                del table.all_items

    patch(Table, "query", query)


def _matching_run(items: Any, comparison: str | None, values: list[Any], page: tuple[int, bool] | None = None) -> list[Any]:
    """The items whose sort key meets the condition, with one neighbour on each side, sorted.

    ``items`` is the partition (moto's dict from range key to item). Sorted on each key's
    ``cast_value`` (moto's own order: ``DynamoType.__lt__`` compares them), the order kept
    between calls while the partition only grows (``partition_order``); the run is found by
    bisection for the ordering conditions, else by moto's ``compare``. ``page`` (a first page's
    ``Limit`` and ``ScanIndexForward``) keeps, of a contiguous run, what moto reads before it
    stops (see :func:`dynamodb_query_reads_one_partition`).
    """
    import bisect

    from longstep_kit.local.moto_patches import partition_order

    keys, places, in_dict_order = partition_order.ordered(items)
    if not comparison:
        low, high = _first_page_span(0, len(keys), page)
        return [in_dict_order[p] for p in places[low:high]]
    span = _bisected(keys, in_dict_order[places[0]] if places else None, comparison, values, bisect)
    if span is None:  # another condition, or values of another type: moto's comparison, item by item
        ordered = [in_dict_order[p] for p in places]
        hits = [i for i, item in enumerate(ordered) if item.range_key.compare(comparison, values)]
        if not hits:
            return []
        return ordered[max(hits[0] - 1, 0) : hits[-1] + 2]  # the hits need not be contiguous: moto walks them all
    low, high = span
    if low >= high:
        return []
    start, stop = _first_page_span(low, high, page)
    return [in_dict_order[p] for p in places[start:stop]]


def _first_page_span(low: int, high: int, page: tuple[int, bool] | None) -> tuple[int, int]:
    """[start, stop) of the sorted items: the matches ``[low, high)`` with a neighbour each side,
    cut to ``page``'s reach."""
    start, stop = max(low - 1, 0), high + 1
    if page is not None:
        limit, forward = page
        if forward:  # the neighbour before, ``limit`` matches, then the item that ends the page
            stop = min(stop, low + limit + 1)
        else:  # the same from the end: moto reverses the list
            start = max(start, high - limit - 1)
    return start, stop


def _bisected(keys: list[Any], first: Any, comparison: str, values: list[Any], bisect: Any) -> tuple[int, int] | None:
    """[low, high) of the keys meeting an ordering condition, or None for another one (``first``:
    the partition's first item in sort order, None if it is empty)."""
    if first is None or any(v.type != first.range_key.type for v in values):
        return None
    bounds = [v.cast_value for v in values]
    op = comparison.upper()
    if op in ("EQ", "="):
        return bisect.bisect_left(keys, bounds[0]), bisect.bisect_right(keys, bounds[0])
    if op in ("LT", "<"):
        return 0, bisect.bisect_left(keys, bounds[0])
    if op in ("LE", "<="):
        return 0, bisect.bisect_right(keys, bounds[0])
    if op in ("GT", ">"):
        return bisect.bisect_right(keys, bounds[0]), len(keys)
    if op in ("GE", ">="):
        return bisect.bisect_left(keys, bounds[0]), len(keys)
    if op == "BETWEEN":
        return bisect.bisect_left(keys, bounds[0]), bisect.bisect_right(keys, bounds[1])
    if op == "BEGINS_WITH" and values[0].type == "S":
        low = high = bisect.bisect_left(keys, bounds[0])
        while high < len(keys) and keys[high].startswith(bounds[0]):
            high += 1
        return low, high
    return None


# -- moto's response serializer ----------------------------------------------------------------


@speed
def serializer_remembers_aliases() -> None:
    """moto's response serializer works out each member's candidate attribute names once.

    For every member of every structure it serializes, moto's ``AttributePicker`` asks six alias
    providers which attribute names to look up on the Python object; the answer depends only on
    the object's class, the member's name and its botocore shape, yet it is recomputed each time
    (a Step Functions history of 250 events: 45,000 members, 130,000 provider calls, 0.4 s).
    Here it is remembered per (picker class, alias providers, object class, member name, shape).
    Keeps identical: the names, their order, and the lookups and transformers moto applies to
    them; an object that carries its own ``Meta`` (explicit aliases on the instance) is not
    remembered.
    """
    from moto.core.serialize import AttributePicker, XFormedAttributePicker

    for cls in (AttributePicker, XFormedAttributePicker):
        _remember_possible_keys(cls)


def _remember_possible_keys(cls: Any) -> None:
    original = vars(cls)["get_possible_keys"]
    cache: dict[tuple[Any, ...], tuple[tuple[str, ...], Any]] = {}

    def get_possible_keys(picker: Any, context: Any) -> Any:
        obj, shape = context.obj, context.shape
        if "Meta" in getattr(obj, "__dict__", ()):  # aliases of this one object: ask every time
            return original(picker, context)
        key = (type(picker), tuple(picker.alias_providers), type(obj), context.key, id(shape))
        found = cache.get(key)
        if found is None:
            # The shape is kept with the answer: its id cannot be reused while the entry lives.
            found = cache[key] = (tuple(original(picker, context)), shape)
        return iter(found[0])

    patch(cls, "get_possible_keys", get_possible_keys)


@speed
def serializer_skips_absent_members() -> None:
    """moto's JSON serializer asks for a plain dict's members only under names the dict has.

    moto serializes a structure member by member, asking its attribute picker for each member's
    value even when the object is a dict that holds none of the member's names: a DynamoDB
    ``AttributeValue`` has ten members and one of them set, so every attribute of every item
    cost ten picker lookups (about half of a GetItem's time in moto). For a ``dict``, its keys
    are looked up in a table of the names each member is looked up under (moto's own
    ``get_possible_keys``, built once per picker, alias providers, shape and operation), and only
    the members found are serialized, in the shape's order. Keeps identical:
    the members serialized, their order and values (moto's own member serialization), and moto's
    path whenever the object is not a plain dict, the picker has response transformers (they
    may turn an absent value into one) or a name is a dotted path.
    """
    from moto.core.serialize import AttributePicker, AttributePickerContext, BaseJSONSerializer

    original = vars(BaseJSONSerializer)["_serialize_type_structure"]
    # Per (picker class, alias providers, shape, operation): the shape's members in order and, for
    # each name a member is looked up under, the members (by place) that name belongs to.
    plans: dict[tuple[Any, ...], tuple[tuple[tuple[str, Any], ...], dict[str, tuple[int, ...]], Any, Any] | None] = {}

    def member_plan(serializer: Any, picker: Any, value: dict[str, Any], shape: Any) -> Any:
        operation = serializer.operation_model
        key = (type(picker), tuple(picker.alias_providers), id(shape), id(operation))
        found = plans.get(key, False)
        if found is False:
            members = tuple(shape.members.items())
            owners: dict[str, list[int]] = {}
            dotted = False
            for place, (name, member_shape) in enumerate(members):
                context = AttributePickerContext(
                    obj=value, key=name, shape=member_shape, operation_model=operation, service_model=getattr(operation, "service_model", None)
                )
                for candidate in picker.get_possible_keys(context):
                    dotted = dotted or "." in candidate
                    owners.setdefault(candidate, []).append(place)
            # The shape and operation are kept with the answer: their ids cannot be reused while it lives.
            found = plans[key] = None if dotted else (members, {n: tuple(p) for n, p in owners.items()}, shape, operation)
        return found

    def serialize_structure(serializer: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        picker = serializer._value_picker
        if type(value) is not dict or shape.is_document_type or not isinstance(picker, AttributePicker) or picker.response_transformers:
            return original(serializer, serialized, value, shape, key)
        plan = member_plan(serializer, picker, value, shape)
        if plan is None:
            return original(serializer, serialized, value, shape, key)
        members, owners = plan[0], plan[1]
        present: set[int] = set()  # the members one of whose names the dict holds
        for name in value:
            places = owners.get(name)
            if places is not None:
                present.update(places)
        # ResponseSerializer._serialize_type_structure, with the members the dict cannot hold skipped.
        wrapper: Any = serializer.MAP_TYPE() if key else serialized
        for place, (member_key, member_shape) in enumerate(members):
            member_shape.parent = shape
            if place in present:
                serializer._serialize_structure_member(wrapper, value, member_shape, member_key)
        if key:
            serializer._default_serialize(serialized, wrapper, shape, key)

    patch(BaseJSONSerializer, "_serialize_type_structure", serialize_structure)
