"""A start on a local endpoint needs a model that answers there: moto has no Bedrock (its Converse
action is not implemented), so a run whose model resolves to ``bedrock`` would escalate at its
first turn. ``longstep start`` refuses such a start at the door, in one line saying how to give a
scripted model; ``local serve`` prints the same hint beside an escalation that says it."""

from __future__ import annotations

import argparse
from typing import Any

SCRIPTED_MODEL_HINT = (
    "a run on the local stack needs a scripted model: serve with `longstep local serve --scenario events/scenarios/triage.json` "
    "and start the input it writes (its model is scripted), or give the start input "
    '"model": {"provider": "scripted", "script_uri": "s3://..."} (docs/scenarios.md)'
)


def check_local_model(args: argparse.Namespace, payload: dict[str, Any]) -> None:
    """Refuse a start against a loopback endpoint whose model resolves to ``bedrock``.

    The provider is the start input's ``model.provider``, else the agent's (from the project's
    ``cdk.json``, when the command runs in a project), else ``bedrock``.

    Raises:
        CliError: the run's model is Bedrock's and the endpoint is a local one (exit 2).
    """
    from longstep_kit.cli.errors import CliError

    aws = getattr(args, "aws", None)
    endpoint = getattr(aws, "endpoint_url", None)
    if not endpoint or not aws.is_local:
        return
    model = payload.get("model") if isinstance(payload.get("model"), dict) else {}
    provider = model.get("provider") or _agent_provider(str(payload.get("agent") or "")) or "bedrock"
    if provider != "bedrock":
        return
    raise CliError(f"start input: model: {endpoint} is a local stack and has no Bedrock (the run would escalate at once)", hint=SCRIPTED_MODEL_HINT)


def _agent_provider(agent: str) -> str | None:
    """The provider the agent declares, when the project's agents can be loaded; else None."""
    if not agent:
        return None
    try:
        from longstep_kit.project import agent_catalog

        return agent_catalog()(agent).model.provider
    except Exception:  # noqa: BLE001 - another project's agents: the start input decides
        return None
