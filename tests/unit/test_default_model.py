"""The default model has one source, ``longstep.settings.DEFAULT_MODEL_ID``: the price table prices
it under its own id, and the documents that show its name and price agree with both."""

import json
import re
from pathlib import Path

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.ops.views.cost import load_prices

ROOT = Path(__file__).resolve().parents[2]
BASE = DEFAULT_MODEL_ID.split(".", 1)[1]  # the foundation model behind the us. profile, priced at its global profile's price
PRICES = load_prices((ROOT / "infra" / "prices.json").read_text())
# Models past their end of life on Bedrock that older copies of these files named.
RETIRED = ("anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic.claude-3-5-sonnet-20241022-v2:0")


def test_the_price_table_prices_the_default_model_itself():
    assert PRICES.default_model is None  # no second name for the default to drift from
    name, prices = PRICES.model(DEFAULT_MODEL_ID)
    assert name == DEFAULT_MODEL_ID and PRICES.model(None) == (name, prices)
    assert prices.per_million_input_tokens > 0 and prices.per_million_output_tokens > 0


def test_prices_follow_the_profile():
    # The entry is the global profile's price; a geographic profile pays about 10% more (issue 37).
    _, listed = PRICES.model(BASE)
    assert PRICES.model(f"global.{BASE}") == (BASE, listed)
    for prefix in ("us", "eu", "jp", "au"):
        name, prices = PRICES.model(f"{prefix}.{BASE}")
        assert name == f"{prefix}.{BASE}"
        assert (
            (prices.per_million_input_tokens, prices.per_million_output_tokens)
            == (3.3, 16.5)
            == (
                round(listed.per_million_input_tokens * 1.1, 10),
                round(listed.per_million_output_tokens * 1.1, 10),
            )
        )
    # A model without a geographic premium costs the same through any profile.
    haiku = "anthropic.claude-3-haiku-20240307-v1:0"
    assert PRICES.model(f"us.{haiku}") == PRICES.model(haiku)


def test_the_documents_show_the_default_model_at_its_price():
    _, prices = PRICES.model(None)
    operations = (ROOT / "docs" / "operations.md").read_text()
    (line,) = [line for line in operations.splitlines() if line.strip().startswith("model input tokens")]
    assert f"({DEFAULT_MODEL_ID})" in line and f"${prices.per_million_input_tokens:g} per 1M tokens" in line
    (line,) = [line for line in operations.splitlines() if line.strip().startswith("model output tokens")]
    assert f"${prices.per_million_output_tokens:g} per 1M tokens" in line

    example = json.loads((ROOT / "bench" / "results" / "cost.json").read_text())["model_turn_example"]
    assert example["model"] == DEFAULT_MODEL_ID
    expected = (example["input_tokens"] * prices.per_million_input_tokens + example["output_tokens"] * prices.per_million_output_tokens) / 1e6
    assert abs(example["dollars"] - expected) < 1e-9
    results = (ROOT / "bench" / "RESULTS.md").read_text()
    assert re.search(rf"costs \$[0-9.]+ with {re.escape(DEFAULT_MODEL_ID)}", results)


def test_no_shipped_file_names_a_retired_model():
    for path in ("infra/prices.json", "bench/RESULTS.md", "bench/results/cost.json", "docs/operations.md", "docs/configuration.md"):
        text = (ROOT / path).read_text()
        assert not [model for model in RETIRED if model in text], path
