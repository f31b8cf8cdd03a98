"""Step Functions workflow variables in JSONPath states, for moto's engine.

moto evaluates every variable reference (``"FunctionName.$": "$call_tool_function"``) as a
JSONata expression, which needs a JSONata engine moto does not ship. The loop only reads
variables by reference path (``$name`` or ``$name.field``), which AWS resolves without JSONata
(https://docs.aws.amazon.com/step-functions/latest/dg/workflow-variables.html); this resolves
those the same way, from moto's own variable store (which keeps AWS's scoping: a Map iteration
reads the variables of the scope around it). Anything else is left to moto.
"""

from __future__ import annotations

import re
from typing import Any

from longstep_kit.local.moto_patches.registry import fidelity, patch

_REFERENCE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")


@fidelity("https://docs.aws.amazon.com/step-functions/latest/dg/workflow-variables.html")
def variables_by_reference() -> None:
    """Patch moto's variable sampling (undone with every moto patch when the local stack stops)."""
    from moto.stepfunctions.parser.asl.component.common.query_language import QueryLanguageMode
    from moto.stepfunctions.parser.asl.component.common.string.string_expression import StringVariableSample

    original = StringVariableSample._eval_body

    def eval_body(self: Any, env: Any) -> None:
        match = _REFERENCE.match(self.expression)
        if self.query_language_mode != QueryLanguageMode.JSONPath or match is None:
            original(self, env)
            return
        value = env.variable_store.get(match.group(1))
        for name in filter(None, match.group(2).split(".")):
            value = value[name]
        env.stack.append(value)

    patch(StringVariableSample, "_eval_body", eval_body)
