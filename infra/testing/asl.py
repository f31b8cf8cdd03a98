"""Read state machine definitions out of a synthesized template, with ARNs made concrete.

CDK writes a definition as ``Fn::Join`` over strings and ``Fn::GetAtt``/``Ref`` tokens. Tools that
check the ASL (the golden copy, asl-validator) need plain JSON, so tokens become stable
placeholder ARNs named after the logical id.
"""

from __future__ import annotations

import json
from typing import Any

PLACEHOLDER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:{logical_id}"


def _resolve(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(_resolve(p) for p in parts)
        if "Fn::GetAtt" in value:
            return PLACEHOLDER_ARN.format(logical_id=value["Fn::GetAtt"][0])
        if "Ref" in value:
            ref = value["Ref"]
            return {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}.get(
                ref, PLACEHOLDER_ARN.format(logical_id=ref)
            )
    raise ValueError(f"cannot resolve {value!r} in a state machine definition")


def state_machine_definitions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> parsed ASL definition of every state machine in ``template``."""
    out = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") == "AWS::StepFunctions::StateMachine":
            out[logical_id] = json.loads(_resolve(resource["Properties"]["DefinitionString"]))
    return out


def all_states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state of a definition, including those inside Map and Parallel, by name."""
    states: dict[str, dict[str, Any]] = {}
    for name, state in definition.get("States", {}).items():
        states[name] = state
        if "ItemProcessor" in state:
            states.update(all_states(state["ItemProcessor"]))
        if "Iterator" in state:
            states.update(all_states(state["Iterator"]))
        for branch in state.get("Branches", []):
            states.update(all_states(branch))
    return states
