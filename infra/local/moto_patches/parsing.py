"""moto and botocore parse the same documents again and again: a template on every deploy, a state
machine's definition on every execution, botocore's service models for every new session (moto
starts each mock with a fresh default session). Each is parsed once here, with the same results.

None changes what is done with the parsed document; they only skip repeating work whose result
is already known. A local run starts many executions of one definition (a crash campaign,
ContinueAsNew, child runs), and moto's ANTLR parse of the agent's definition costs about half a
second each time; a new session's first DynamoDB client reads botocore's model files again.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable

from longstep_kit.local.moto_patches.registry import speed, patch

# The parse trees of the definitions most recently executed (a stack has a handful of state
# machines; a test session deploys a few projects): bounded, least recently used dropped first.
_TREES_KEPT = 32
_trees: OrderedDict[str, Any] = OrderedDict()
# moto's Preprocessor keeps its query-language scope stack in a class attribute, one list shared by
# every instance: two definitions preprocessed at once (two executions starting together, a
# child run and its parent) push and pop each other's scopes. Preprocessing is serialized here
# (the lock also guards ``_trees``).
_preprocessing = threading.Lock()


@speed
def definitions_parse_once() -> None:
    """moto's ``AmazonStateLanguageParser.parse`` keeps the ANTLR parse tree of each definition.

    Keeps identical: every call still returns a program built fresh from the tree by moto's own
    ``Preprocessor`` (no evaluation component is shared between executions: they hold state
    while they run), and a definition that fails to parse raises as before (nothing is kept).
    The tree itself is read-only once built: the preprocessor only visits it. One parse runs at
    a time (``_preprocessing``: moto's preprocessor is not thread-safe).
    """
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    original = AmazonStateLanguageParser.parse

    def parse(definition: str) -> tuple[Any, Any]:
        with _preprocessing:
            tree = _trees.get(definition)
            if tree is not None:
                _trees.move_to_end(definition)
                return Preprocessor().visit(tree), tree
            program, tree = original(definition)
            _trees[definition] = tree
            while len(_trees) > _TREES_KEPT:
                _trees.popitem(last=False)
            return program, tree

    patch(AmazonStateLanguageParser, "parse", staticmethod(parse))


@speed
def templates_parse_as_json() -> None:
    """moto's CloudFormation reads a JSON template with ``json.loads`` before trying YAML.

    moto tries PyYAML first and JSON only when YAML fails; a synthesized template is JSON, which
    PyYAML reads to the same document at about fifty times the cost. Keeps identical: the
    document (JSON is YAML's subset), and moto's own YAML path for anything that is not JSON
    (its CloudFormation tags: ``!Ref``, ``!GetAtt``).
    """
    from moto.cloudformation.models import Stack

    original = Stack.parse_template

    def parse_template(template: str) -> dict[str, Any]:
        try:
            document = json.loads(template)
        except ValueError:
            return original(template)
        return document if isinstance(document, dict) else original(template)

    patch(Stack, "parse_template", staticmethod(parse_template))


# The documents botocore loaded (service models, endpoints), per data path: shared by the loader
# of every session this process creates.
_loaded: dict[str | None, dict[Any, Any]] = {}


@speed
def sessions_share_loaded_models() -> None:
    """Every new botocore session's loader starts with the documents earlier sessions loaded.

    A loader caches what it reads per instance, and moto resets boto3's default session each
    time a mock starts, so each stack (and each functional test) read the same JSON models again.
    Keeps identical: the loader itself (its search paths, its lookups), the documents (botocore
    shares one loaded model between the clients of one session already: it is read, not
    changed), and the sessions (credentials, configuration: nothing else is shared).
    """
    import botocore.session

    patch(botocore.session, "create_loader", loaders_share_models(botocore.session.create_loader))


def loaders_share_models(create_loader: Callable[..., Any]) -> Callable[..., Any]:
    """``create_loader`` (botocore's), each loader it makes sharing one cache of loaded documents
    per data path (what :func:`sessions_share_loaded_models` installs; the test suite installs it
    for its own mocks too)."""

    def sharing(search_path_string: str | None = None) -> Any:
        loader = create_loader(search_path_string)
        loader._cache = _loaded.setdefault(search_path_string, {})
        return loader

    return sharing


# JSONPath expressions parsed so far, per parser: a definition has a few dozen distinct paths.
_PATHS_KEPT = 4096
_paths: dict[tuple[Any, str], Any] = {}
_paths_lock = threading.Lock()


@speed
def json_paths_parse_once() -> None:
    """moto's ASL engine keeps the parsed form of each JSONPath it evaluates.

    ``extract_json`` (InputPath, OutputPath, Parameters' ``.$`` fields, ItemsPath, Choice
    variables) and ``ResultPath`` call jsonpath_ng's ``parse`` on every evaluation, and each call
    builds a new PLY lexer and yacc parser: most of moto's own time per state. Keeps identical:
    the parsed expression is jsonpath_ng's own (``find`` and ``update_or_create`` read it and
    never change it: they change only the document they are given), a path that fails to parse
    raises as before (nothing is kept), and the two parsers (moto's ``jsonpath_ng.ext`` for
    reads, plain ``jsonpath_ng`` for ResultPath) keep separate entries.
    """
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    for module in (json_path, result_path):
        patch(module, "parse", parsing_once(module.parse))


def parsing_once(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` (a jsonpath_ng parser), remembering each path's parsed expression."""

    def parse_once(path: str) -> Any:
        key = (parse, path)
        found = _paths.get(key)
        if found is None:
            found = parse(path)
            with _paths_lock:
                if len(_paths) >= _PATHS_KEPT:
                    _paths.clear()
                _paths[key] = found
        return found

    return parse_once
