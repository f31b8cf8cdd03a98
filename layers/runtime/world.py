"""An agent's world fixtures: what a local scenario may seed into the systems its tools use.

The agent declares the shape (a pydantic model) and a loader; the local stack validates a
scenario's ``world`` against the shape and calls the loader with the function environment of the
agent's tool calls, so the loader writes where the tools read (tables, buckets, chunked bodies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from longstep.errors import describe_validation_error


class WorldError(ValueError):
    """A world fixture does not fit the agent's world model; the message names the field."""


@dataclass(frozen=True)
class World:
    """How an agent's world is seeded for a local run.

    Attributes:
        model: the pydantic model of a scenario's ``world`` object.
        load: ``load(world)`` puts a validated world into the agent's systems of record; it runs
            with the environment of the agent's CallTool function (``longstep.environment``).
    """

    model: type[BaseModel]
    load: Callable[[Any], None]

    def parse(self, raw: Any) -> BaseModel:
        """Validate a scenario's ``world`` object.

        Raises:
            WorldError: naming the first bad field as ``world.<path>``.
        """
        try:
            return self.model.model_validate(raw if raw is not None else {})
        except ValidationError as exc:
            raise WorldError(describe_validation_error(exc, prefix="world.")) from None
