"""The sample agent's world: documents, tickets and an outbox in DynamoDB tables."""

from __future__ import annotations

from typing import Any

from longstep import clients, environment

ENV_DOCUMENTS_TABLE = "LONGSTEP_DOCUMENTS_TABLE"
ENV_TICKETS_TABLE = "LONGSTEP_TICKETS_TABLE"
ENV_OUTBOX_TABLE = "LONGSTEP_OUTBOX_TABLE"


def table(env_name: str) -> str:
    """The physical name of a world table, from the function's environment."""
    name = environment.get(env_name).strip()
    if not name:
        raise RuntimeError(f"environment variable {env_name} is not set")
    return name


def documents() -> str:
    return table(ENV_DOCUMENTS_TABLE)


def tickets() -> str:
    return table(ENV_TICKETS_TABLE)


def outbox() -> str:
    return table(ENV_OUTBOX_TABLE)


def ddb() -> Any:
    return clients.client("dynamodb")
