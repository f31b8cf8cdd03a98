"""The deploys' versions a state machine keeps, the executions running on each, and pruning.

Each deploy publishes a state machine version calling its own Lambda function versions
(docs/deploy.md "Pinning"); they are retained, since runs pinned to them may wait for days.
A state machine version is unused when no execution runs on it and no alias routes to it. AWS:
deleting a state machine version does not stop its running executions
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_DeleteStateMachineVersion.html),
so running ones are never pruned, and a function version is deleted only when no kept state
machine version's definition calls it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from longstep.pinning import parse_compatible

# A qualified function ARN in a definition: the version a task calls.
_FUNCTION_VERSION = re.compile(r"^arn:[\w-]+:lambda:[\w-]+:\d+:function:[\w-]+:\d+$")


@dataclass
class StateMachineVersion:
    """One published version of the state machine.

    Attributes:
        arn: the version's ARN (``<state machine>:<n>``).
        number: its number.
        aliases: the aliases routing to it.
        running: names of the executions running on it.
        functions: the function version ARNs its definition calls.
        compatible: the run code versions it accepts at continue-as-new.
    """

    arn: str
    number: int
    aliases: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    compatible: frozenset[str] = frozenset()

    @property
    def in_use(self) -> bool:
        return bool(self.aliases or self.running)


def _function_versions(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set().union(*(_function_versions(v) for v in node.values())) if node else set()
    if isinstance(node, list):
        return set().union(*(_function_versions(v) for v in node)) if node else set()
    return {node} if isinstance(node, str) and _FUNCTION_VERSION.match(node) else set()


def list_versions(sfn: Any, state_machine_arn: str) -> list[StateMachineVersion]:
    """Every version of the state machine, newest first, with its aliases and running executions."""
    aliases: dict[str, list[str]] = {}
    for alias in sfn.list_state_machine_aliases(stateMachineArn=state_machine_arn)["stateMachineAliases"]:
        routes = sfn.describe_state_machine_alias(stateMachineAliasArn=alias["stateMachineAliasArn"])["routingConfiguration"]
        for route in routes:
            aliases.setdefault(route["stateMachineVersionArn"], []).append(alias["stateMachineAliasArn"].rpartition(":")[2])
    found = []
    kwargs: dict[str, Any] = {"stateMachineArn": state_machine_arn}
    while True:
        page = sfn.list_state_machine_versions(**kwargs)
        for item in page["stateMachineVersions"]:
            arn = item["stateMachineVersionArn"]
            described = sfn.describe_state_machine(stateMachineArn=arn)
            running = sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING", maxResults=1000)["executions"]
            found.append(
                StateMachineVersion(
                    arn=arn,
                    number=int(arn.rpartition(":")[2]),
                    aliases=sorted(aliases.get(arn, [])),
                    running=sorted(e["name"] for e in running),
                    functions=_function_versions(json.loads(described["definition"])),
                    compatible=parse_compatible(described.get("description")),
                )
            )
        if not page.get("nextToken"):
            return sorted(found, key=lambda v: -v.number)
        kwargs["nextToken"] = page["nextToken"]


@dataclass
class Pruned:
    """What a prune removed (or would remove, for a dry run)."""

    state_machine_versions: list[str]
    function_versions: list[str]


def prune(sfn: Any, lam: Any, state_machine_arn: str, dry_run: bool = False) -> Pruned:
    """Delete the unused state machine versions, then the function versions no kept one calls."""
    versions = list_versions(sfn, state_machine_arn)
    unused = [v for v in versions if not v.in_use]
    kept_calls = set().union(*(v.functions for v in versions if v.in_use)) if versions else set()
    functions = {arn.rsplit(":", 1)[0] for v in versions for arn in v.functions}
    doomed = []
    for function in sorted(functions):
        # By name (AWS takes a name or an ARN; moto 5.2.5 lists nothing for an ARN).
        for item in lam.list_versions_by_function(FunctionName=function.rpartition(":")[2])["Versions"]:
            qualified = f"{function}:{item['Version']}"
            if item["Version"] != "$LATEST" and qualified not in kept_calls:
                doomed.append(qualified)
    if not dry_run:
        for version in unused:
            sfn.delete_state_machine_version(stateMachineVersionArn=version.arn)
        for arn in doomed:
            name, _, number = arn.rpartition(":")
            lam.delete_function(FunctionName=name, Qualifier=number)
    return Pruned([v.arn for v in unused], doomed)
