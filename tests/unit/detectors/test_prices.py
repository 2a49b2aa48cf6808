"""The price table: a model's entry is its provider's (another provider's entry of the
same name is used only when the provider has none), the first exact entry wins, prices are
zero or more, and a price file that is not JSON is refused with its path."""

from __future__ import annotations

import datetime as dt

import pytest
from pathgrade.detectors.prices import ModelPrice, PriceTable, cost_usd, load_price_table
from pydantic import ValidationError


def price(provider: str, model: str, usd: float) -> ModelPrice:
    return ModelPrice(
        provider=provider, model=model, input_usd_per_mtok=usd, output_usd_per_mtok=usd
    )


TABLE = PriceTable(
    version="t",
    effective_date=dt.date(2026, 1, 1),
    models=(
        price("bravo", "house", 2.0),
        price("alpha", "house", 1.0),
        price("charlie", "house", 3.0),
        price("bravo", "house", 9.0),  # a second exact entry: the first wins
    ),
)


@pytest.mark.parametrize(("provider", "usd"), [("alpha", 1.0), ("bravo", 2.0), ("charlie", 3.0)])
def test_a_model_is_priced_at_its_own_provider_s_entry(provider: str, usd: float) -> None:
    assert TABLE.price_of("house", provider) == price(provider, "house", usd)
    assert cost_usd("house", provider, 1_000_000, 1_000_000, TABLE) == 2 * usd


def test_without_an_entry_of_its_provider_any_entry_of_the_name_is_used() -> None:
    assert cost_usd("house", "delta", 1_000_000, 0, TABLE) == 2.0  # the first of the name
    assert cost_usd("house", "delta", 1, 0, TABLE) == 2.0 / 1_000_000


@pytest.mark.parametrize("field", ["input_usd_per_mtok", "output_usd_per_mtok"])
def test_a_price_is_zero_or_more(field: str) -> None:
    values = {"provider": "p", "model": "m", "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}
    assert getattr(ModelPrice(**{**values, field: 0}), field) == 0
    with pytest.raises(ValidationError, match=field):
        ModelPrice(**{**values, field: -1})


def test_a_price_file_that_is_not_json_names_its_path(tmp_path) -> None:
    path = tmp_path / "prices.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"prices\.json: invalid price table"):
        load_price_table(path)


def test_a_price_table_cannot_be_changed() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        TABLE.version = "u"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        TABLE.models[0].model = "other"  # type: ignore[misc]
