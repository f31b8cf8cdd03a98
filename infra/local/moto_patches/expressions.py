"""moto's DynamoDB expressions: each processor builds its table of node kinds once per instance,
and each distinct condition expression is lexed once.

An UpdateItem's expression goes through ten processors (moto's ``UpdateExpressionValidator``),
each a depth-first walk of the expression's tree. At every node of every walk moto's
``DepthFirstTraverser`` asks ``_processing_map()`` for a new dict of bound methods, twice for a
node it processes (``nodes_to_be_processed`` and ``process``): most of a walk's time, on every
UpdateItem a handler makes.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from longstep_kit.local.moto_patches.registry import patch

_MAP, _KINDS = "_longstep_processing_map", "_longstep_node_kinds"


def expression_processors_map_once() -> None:
    """moto's ``DepthFirstTraverser`` reads each processor's ``_processing_map()`` once per instance.

    Keeps identical: the map is the processor's own (its node classes, in its order, and its
    bound methods, which read the processor's state when called), the node each walk processes
    and what it returns, and moto's errors. A processor instance serves one validation (moto
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

    patch(DepthFirstTraverser, "nodes_to_be_processed", nodes_to_be_processed)
    patch(DepthFirstTraverser, "process", process)


# Condition expressions lexed so far (a handler sends a handful of distinct ones): bounded.
_LEXED_KEPT = 1024
_lexed: dict[str, tuple[Any, ...]] = {}
_lexed_lock = threading.Lock()


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
        return deque(node._replace(children=[]) for node in found)

    patch(ConditionExpressionParser, "_lex_condition_expression", lex)
