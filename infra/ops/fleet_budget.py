"""Budgets from the kit's side: a start input's ``budget`` priced from the price table that
``show --cost`` uses, and the human's answer to a run's ask (``longstep budget``)."""

from __future__ import annotations

from typing import Any

from longstep_kit.ops.views.cost import Prices


def priced_budget(budget: dict[str, Any], model_id: str | None, prices: Prices) -> dict[str, Any]:
    """``budget`` with the prices of ``model_id`` (the table's default model when not listed), as
    a run started now would be charged: the run keeps them, so a later price change does not
    move its limit."""
    if budget.get("usd") is None or budget.get("prices"):
        return dict(budget)
    _, model = prices.model(model_id)
    return {**budget, "prices": {"input_per_million": model.per_million_input_tokens, "output_per_million": model.per_million_output_tokens}}
