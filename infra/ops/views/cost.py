"""Price tables (``longstep_kit/prices.json``) and a run's estimated cost under one."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.bedrock_access import split_profile
from longstep_kit.ops.views import InspectError
from longstep_kit.ops.views.usage import Usage

_GIB = 1024**3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepFunctionsPrices(_Strict):
    """Standard workflows."""

    per_1000_state_transitions: float = Field(ge=0)


class LambdaPrices(_Strict):
    """Lambda on the functions' architecture."""

    per_gb_second: float = Field(ge=0)
    per_million_requests: float = Field(ge=0)


class DynamoDBPrices(_Strict):
    """On-demand capacity, Standard table class."""

    per_million_write_request_units: float = Field(ge=0)
    per_million_read_request_units: float = Field(ge=0)
    per_gb_month: float = Field(ge=0)


class S3Prices(_Strict):
    """S3 Standard."""

    per_1000_put_requests: float = Field(ge=0)
    per_1000_get_requests: float = Field(ge=0)
    per_gb_month: float = Field(ge=0)


class ModelPrices(_Strict):
    """On-demand model tokens.

    Attributes:
        geographic_premium: what a geographic profile (``us.``, ``eu.``, ``jp.``...) of the model
            costs over these prices, as a fraction (0.1: 10% more). For the models with a global
            profile, AWS prices it about 10% below the geographic ones
            (https://docs.aws.amazon.com/bedrock/latest/userguide/global-cross-region-inference.html);
            their entry holds the global price. 0: a profile costs what the model does.
    """

    per_million_input_tokens: float = Field(ge=0)
    per_million_output_tokens: float = Field(ge=0)
    geographic_premium: float = Field(default=0.0, ge=0)


class Prices(_Strict):
    """A price table (``longstep_kit/prices.json``).

    Attributes:
        region: the region the prices are for.
        currency: the currency (USD).
        as_of: when the prices were read off the providers' price pages.
        default_model: the model whose prices apply to runs whose model is not in the table
            (scripted runs); None (the shipped table): the stack's default model,
            ``longstep.settings.DEFAULT_MODEL_ID``, so the default has one source.
        models: per model id: a foundation model's price is its global cross-Region profile's
            (and a plain id's); a profile id listed here is priced as listed.
    """

    region: str
    currency: str = "USD"
    as_of: str
    note: str = ""
    step_functions: StepFunctionsPrices
    lambda_: LambdaPrices = Field(alias="lambda")
    dynamodb: DynamoDBPrices
    s3: S3Prices
    default_model: str | None = None
    models: dict[str, ModelPrices]

    def model(self, model_id: str | None) -> tuple[str, ModelPrices]:
        """The prices of ``model_id`` (and the id they are listed under), else the default's.

        Raises:
            InspectError: the default model is not in ``models``.
        """
        found = self._lookup(model_id)
        if found is not None:
            return found
        default = self.default_model or DEFAULT_MODEL_ID
        found = self._lookup(default)
        if found is None:
            raise InspectError(f"prices: default_model {default!r} is not in models")
        return found

    def _lookup(self, model_id: str | None) -> tuple[str, ModelPrices] | None:
        """``model_id``'s entry; a profile not listed itself: its model's, plus the premium of a
        geographic profile (``global.`` and plain ids pay the entry's price)."""
        if not model_id:
            return None
        if model_id in self.models:
            return model_id, self.models[model_id]
        prefix, base = split_profile(model_id)
        if prefix is None or base not in self.models:
            return None
        listed = self.models[base]
        if prefix == "global":
            return base, listed
        if not listed.geographic_premium:
            return base, listed
        factor = 1 + listed.geographic_premium
        return model_id, ModelPrices(
            per_million_input_tokens=round(listed.per_million_input_tokens * factor, 10),
            per_million_output_tokens=round(listed.per_million_output_tokens * factor, 10),
        )


def load_prices(text: str) -> Prices:
    """Parse a price table from JSON text.

    Raises:
        InspectError: naming each invalid field.
    """
    from pydantic import ValidationError

    try:
        return Prices.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise InspectError(f"invalid price table: {problems}") from None


@dataclass(frozen=True)
class CostLine:
    """One item of a cost estimate: ``quantity`` × ``unit_price`` = ``dollars``.

    Attributes:
        item: what is priced.
        quantity: how much of it.
        unit: its unit.
        unit_price: dollars per unit.
        dollars: quantity × unit_price.
        per: the quantity the price table quotes a price for (1, 1,000 or 1,000,000 units).
    """

    item: str
    quantity: float
    unit: str
    unit_price: float
    dollars: float
    per: int = 1


@dataclass
class CostEstimate:
    """A run's estimated cost.

    Attributes:
        lines: the items, in a fixed order; ``total`` is their sum.
        total: dollars for what the run did (requests, compute, tokens).
        infrastructure: ``total`` without the model tokens.
        storage_per_month: dollars per month that the run's records and artifacts stay stored
            (not in ``total``: they expire after the retention period).
        model: the price table entry the tokens were priced with.
        prices_as_of: the price table's date.
    """

    lines: list[CostLine]
    total: float
    infrastructure: float
    storage_per_month: float
    model: str
    prices_as_of: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_cost(usage: Usage, prices: Prices, *, include_model: bool = True) -> CostEstimate:
    """Dollars for ``usage`` under ``prices``.

    total = billed_transitions × sfn/1000 + gb_seconds × lambda/GB-s + invocations × lambda/1M
          + WRU × ddb_write/1M + RRU × ddb_read/1M + puts × s3_put/1000 + gets × s3_get/1000
          + input_tokens × model_in/1M + output_tokens × model_out/1M

    Args:
        usage: what the run used.
        prices: the price table.
        include_model: price the model tokens (False: infrastructure only).
    """
    model_name, model = prices.model(usage.model_id)
    lam, ddb, s3 = prices.lambda_, prices.dynamodb, prices.s3
    thousand, million = 1000, 1_000_000
    rows: list[tuple[str, float, str, float, int]] = [
        ("step functions transitions", usage.billed_transitions, "transition", prices.step_functions.per_1000_state_transitions, thousand),
        ("lambda compute", usage.lambda_gb_seconds, "GB-second", lam.per_gb_second, 1),
        ("lambda requests", usage.lambda_invocations, "request", lam.per_million_requests, million),
        ("dynamodb writes", usage.dynamodb_write_units, "WRU", ddb.per_million_write_request_units, million),
        ("dynamodb reads", usage.dynamodb_read_units, "RRU", ddb.per_million_read_request_units, million),
        ("s3 puts", usage.s3_puts, "request", s3.per_1000_put_requests, thousand),
        ("s3 gets", usage.s3_gets, "request", s3.per_1000_get_requests, thousand),
    ]
    infrastructure = len(rows)
    if include_model:
        rows += [
            ("model input tokens", usage.input_tokens, "token", model.per_million_input_tokens, million),
            ("model output tokens", usage.output_tokens, "token", model.per_million_output_tokens, million),
        ]
    lines = [CostLine(item, float(qty), unit, quoted / per, float(qty) * quoted / per, per) for item, qty, unit, quoted, per in rows]
    storage = usage.dynamodb_bytes / _GIB * ddb.per_gb_month + usage.s3_bytes / _GIB * s3.per_gb_month
    return CostEstimate(
        lines=lines,
        total=sum(line.dollars for line in lines),
        infrastructure=sum(line.dollars for line in lines[:infrastructure]),
        storage_per_month=storage,
        model=model_name,
        prices_as_of=prices.as_of,
    )


@dataclass
class ModelWait:
    """What the model's latency adds: the ModelTurn function's Lambda waits for each model call.

    In AWS a run's measured durations include that wait already; a local run's scripted model
    answers at once, so its durations leave it out. ``per_second`` is what each second of model
    latency per call adds to the run (``model_calls`` × memory × the GB-second price).

    Attributes:
        model_calls: the model calls the run made (its recorded replies).
        memory_mb: the ModelTurn function's memory.
        per_second: dollars per second of model latency per call, over the run.
        seconds: the latency priced in ``dollars``.
        dollars: ``per_second`` × ``seconds``.
    """

    model_calls: int
    memory_mb: int
    per_second: float
    seconds: float
    dollars: float


def model_wait_cost(usage: Usage, prices: Prices, memory_mb: int, seconds: float) -> ModelWait:
    """The ModelTurn function's wait on the model, at ``seconds`` per call, for ``usage``'s calls."""
    per_second = usage.turns * memory_mb / 1024 * prices.lambda_.per_gb_second
    return ModelWait(usage.turns, memory_mb, per_second, seconds, per_second * seconds)
