"""moto's DynamoDB expressions: each processor builds its table of node kinds once per instance
and walks only what does something, the UpdateExpression's tree is copied directly, and each
distinct condition expression is lexed once.

An UpdateItem's expression goes through ten processors (moto's ``UpdateExpressionValidator``),
each a depth-first walk of a deep copy of the expression's tree. At every node of every walk
moto's ``DepthFirstTraverser`` asks ``_processing_map()`` for a new dict of bound methods, twice
for a node it processes (``nodes_to_be_processed`` and ``process``): most of a walk's time, on
every UpdateItem a handler makes. Condition expressions (conditional writes, key conditions,
filters) are lexed by regular expressions, position by position, on every request.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from longstep_kit.local.moto_patches.registry import speed, patch

_MAP, _KINDS = "_longstep_processing_map", "_longstep_node_kinds"


@speed
def expression_processors_map_once() -> None:
    """moto's ``DepthFirstTraverser`` reads each processor's ``_processing_map()`` once per instance.

    Its walk (moto's ``traverse_node_recursively``) skips what does nothing: the walk of a child
    that is not a ``Node`` (moto's walk returns such a child untouched) and the per-child hook
    of a processor that keeps moto's empty one. Keeps identical: the map is the processor's own
    (its node classes, in its order, and its bound methods, which read the processor's state
    when called), the order of the hooks and of the nodes each walk processes, what they return
    and where it goes in the tree, and moto's errors. ``nodes_to_be_processed`` and ``process``
    are called as moto calls them, so a processor that overrides one still has it used. A processor instance serves one validation (moto
    makes new ones for each expression), and every ``_processing_map`` in moto returns the same
    classes and methods on every call.
    """
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser

    def processing_map(traverser: Any) -> dict[Any, Any]:
        found = traverser.__dict__.get(_MAP)
        if found is None:
            found = traverser.__dict__[_MAP] = traverser._processing_map()
        return found

    def nodes_to_be_processed(traverser: Any) -> tuple[Any, ...]:
        found = traverser.__dict__.get(_KINDS)
        if found is None:
            found = traverser.__dict__[_KINDS] = tuple(processing_map(traverser))
        return found

    def process(traverser: Any, node: Any) -> Any:
        for class_key, processor in processing_map(traverser).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    from moto.dynamodb.parsing.ast_nodes import Node

    no_hook = DepthFirstTraverser.pre_processing_of_child  # moto's: does nothing

    def traverse_node_recursively(traverser: Any, node: Any, child_id: int = -1) -> Any:
        # moto's walk, but a child that is not a Node (a name, an index: moto returns it as it
        # is) is not walked into, and the per-child hook is called only where a processor has one.
        if isinstance(node, Node):
            parent_node = node.parent
            if node.children is not None:
                hook = None if type(traverser).pre_processing_of_child is no_hook else traverser.pre_processing_of_child
                walk = traverser.traverse_node_recursively
                fast = type(traverser).traverse_node_recursively is traverse_node_recursively
                for i, child_node in enumerate(node.children):
                    if hook is not None:
                        hook(node, i)
                    if not fast or isinstance(child_node, Node):
                        walk(child_node, i)
            if isinstance(node, traverser.nodes_to_be_processed()):
                node = traverser.process(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
        return node

    patch(DepthFirstTraverser, "nodes_to_be_processed", nodes_to_be_processed)
    patch(DepthFirstTraverser, "process", process)
    patch(DepthFirstTraverser, "traverse_node_recursively", traverse_node_recursively)


# Condition expressions lexed so far (a handler sends a handful of distinct ones): bounded.
_LEXED_KEPT = 1024
_lexed: dict[str, tuple[Any, ...]] = {}
_lexed_lock = threading.Lock()


@speed
def condition_expressions_lex_once() -> None:
    """moto's ``ConditionExpressionParser`` lexes each distinct condition expression once.

    moto lexes a ConditionExpression (or a KeyConditionExpression, a FilterExpression) by
    trying seven regular expressions at each position, on every request; the tokens depend only
    on the expression's text (``_lex_condition_expression`` reads nothing else). Keeps
    identical: the tokens (moto's own, each a fresh node with a fresh empty ``children`` list,
    as moto makes them, in a new deque), the parse that follows them (names and values are
    resolved after lexing, on every request), and moto's error for text it cannot lex (nothing
    is kept then).
    """
    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser._lex_condition_expression

    def lex(parser: Any) -> Any:
        text = parser.condition_expression
        found = _lexed.get(text) if isinstance(text, str) else None
        if found is None:
            tokens = original(parser)
            if not isinstance(text, str) or any(node.children for node in tokens):
                return tokens  # (moto's lexer makes leaves only; anything else is not kept)
            found = tuple(tokens)
            with _lexed_lock:
                if len(_lexed) >= _LEXED_KEPT:
                    _lexed.clear()
                _lexed[text] = found
        # Each token anew (moto's namedtuple, its ``children`` a new empty list): ``_replace`` without its cost.
        return deque([tuple.__new__(type(node), (*node[:4], [])) for node in found])

    patch(ConditionExpressionParser, "_lex_condition_expression", lex)


@speed
def expression_trees_copied_directly() -> None:
    """moto's UpdateExpression validator copies the expression's tree node by node, not by ``deepcopy``.

    moto's ``Validator`` deep-copies the parsed UpdateExpression before its processors change it
    (once or twice per UpdateItem); ``copy.deepcopy`` goes through the pickling protocol for
    each node (``__reduce_ex__``, ``copyreg.__newobj__``, ``_reconstruct``). A tree node is a
    plain object (its ``type`` name, its ``children`` list, its ``parent``), so here each is
    copied directly: a new instance of its class with its attributes copied the same way, in
    the same order, shared references (a child's ``parent``) copied once through the same memo.
    Keeps identical: the copy (``deepcopy``'s result, node for node), and ``deepcopy`` itself for
    whatever is not a plain node, a list or an atom (a ``DynamoType``, with its own
    ``__deepcopy__``; a class with copy hooks of its own), and for the validator's other copy
    (``list_append``'s operand).
    """
    import copy

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node

    plain: dict[type, bool] = {}

    def is_plain(cls: type) -> bool:
        found = plain.get(cls)
        if found is None:
            found = plain[cls] = (
                "__slots__" not in dir(cls)
                and not hasattr(cls, "__deepcopy__")
                and cls.__reduce_ex__ is object.__reduce_ex__  # type: ignore[comparison-overlap]
                and cls.__reduce__ is object.__reduce__  # type: ignore[comparison-overlap]
                and cls.__getstate__ is object.__getstate__  # type: ignore[attr-defined]
                and not hasattr(cls, "__setstate__")
            )
        return found

    atoms = (str, int, float, bool, type(None))

    def copied(x: Any, memo: dict[int, Any]) -> Any:
        kind = type(x)
        if kind in atoms:
            return x  # deepcopy's atoms: returned as they are, not remembered
        found = memo.get(id(x))
        if found is not None:
            return found
        if kind is list:
            y: Any = []
            memo[id(x)] = y
            for element in x:
                y.append(copied(element, memo))
        elif isinstance(x, Node) and is_plain(kind):
            y = kind.__new__(kind)
            memo[id(x)] = y
            y.__dict__.update({name: copied(value, memo) for name, value in x.__dict__.items()})
        else:
            return copy.deepcopy(x, memo)
        memo.setdefault(id(memo), []).append(x)  # deepcopy's keep-alive: ids stay unique while copying
        return y

    def deepcopy(x: Any, memo: dict[int, Any] | None = None) -> Any:
        if not isinstance(x, Node):
            return copy.deepcopy(x, memo)
        return copied(x, {} if memo is None else memo)

    patch(validators, "deepcopy", deepcopy)
