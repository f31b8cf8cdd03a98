"""Every change the local stack makes to moto, in one registry that undoes them all.

The local stack patches moto where moto differs from AWS or where it must run the real handlers
(in-process Lambda, the virtual clock, atomic DynamoDB writes, limits). Each patch goes through
:func:`patch`, which records the attribute it replaced, so :func:`undo_all` (called when the
stack stops) puts every original back, last patched first, and nothing leaks into the next
stack or the next test.

Each caller states, next to its ``patch`` call, what the replacement keeps identical to moto.
Each patch function is marked (:mod:`.registry`): a fidelity fix with the AWS documentation pages
it follows, a speed patch that leaves moto's answers as they are, or the local stack's harness; a
patch of an attribute moto lacks fails the stack's start naming the patch. The engine's ASL fixes
(``local/asl_strictness.py``), the workflow variables (``local/variables.py``) and the lost
acknowledgements of fault injection (``local/fault_kinds.py``) go through the same registry.
"""

from longstep_kit.local.moto_patches.dynamodb import (
    dynamodb_atomic,
    dynamodb_query_reads_one_partition,
    serializer_remembers_aliases,
    serializer_skips_absent_members,
)
from longstep_kit.local.moto_patches.engine import (
    engine_reuses_clients,
    execution_end_notifies,
    route_lambda,
    send_task_failure_keeps_cause,
    stop_execution_aborts,
    virtual_clock,
)
from longstep_kit.local.moto_patches.expressions import (
    condition_expressions_lex_once,
    expression_processors_map_once,
    expression_trees_copied_directly,
)
from longstep_kit.local.moto_patches.idempotency import transactions_keep_request_tokens
from longstep_kit.local.moto_patches.parsing import (
    definitions_parse_once,
    json_paths_parse_once,
    sessions_share_loaded_models,
    templates_parse_as_json,
)
from longstep_kit.local.moto_patches.plumbing import response_actions_listed_once, user_agent_parts_cleaned_once
from longstep_kit.local.moto_patches.registry import CATALOGUE, FIDELITY, HARNESS, SPEED, MissingMotoAttribute, add, applied, patch, undo, undo_all
from longstep_kit.local.moto_patches.routing import requests_routed_once
from longstep_kit.local.moto_patches.timestamps import engine_timestamps
from longstep_kit.local.moto_patches.versions import (
    event_bus_refs,
    event_rules_invoke_lambda,
    execution_status_events,
    lambda_version_refs,
    state_machine_versions,
)

__all__ = [
    "CATALOGUE",
    "FIDELITY",
    "HARNESS",
    "MissingMotoAttribute",
    "SPEED",
    "add",
    "applied",
    "condition_expressions_lex_once",
    "definitions_parse_once",
    "dynamodb_atomic",
    "dynamodb_query_reads_one_partition",
    "engine_reuses_clients",
    "engine_timestamps",
    "event_bus_refs",
    "event_rules_invoke_lambda",
    "execution_end_notifies",
    "execution_status_events",
    "expression_processors_map_once",
    "expression_trees_copied_directly",
    "json_paths_parse_once",
    "lambda_version_refs",
    "patch",
    "requests_routed_once",
    "response_actions_listed_once",
    "route_lambda",
    "send_task_failure_keeps_cause",
    "serializer_remembers_aliases",
    "serializer_skips_absent_members",
    "sessions_share_loaded_models",
    "state_machine_versions",
    "stop_execution_aborts",
    "templates_parse_as_json",
    "transactions_keep_request_tokens",
    "undo",
    "undo_all",
    "user_agent_parts_cleaned_once",
    "virtual_clock",
]
