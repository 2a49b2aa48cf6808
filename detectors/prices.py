"""The versioned model price table and cost = tokens x list price (never agent-reported cost).

The shipped table lives in `detectors/data/prices-<version>.json`; a user file overrides
entries with the same (provider, model) and adds new ones.
"""

from __future__ import annotations

import datetime as dt
import json
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SHIPPED_TABLE = "prices-2025-07-01.json"


class ModelPrice(BaseModel):
    """List price of one model in USD per one million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str
    model: str
    input_usd_per_mtok: float = Field(ge=0)
    output_usd_per_mtok: float = Field(ge=0)


class PriceTable(BaseModel):
    """A versioned price table; `models` are matched by exact name, then by longest prefix."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    effective_date: dt.date
    note: str = ""
    models: tuple[ModelPrice, ...]

    def price_of(self, model: str, provider: str = "") -> ModelPrice | None:
        """The entry for `model` (a dated variant such as gpt-4o-2024-08-06 matches gpt-4o)."""
        candidates = [p for p in self.models if not provider or p.provider == provider]
        exact = [p for p in candidates if p.model == model]
        if exact:
            return exact[0]
        prefixed = [p for p in candidates if model.startswith(p.model + "-")]
        return max(prefixed, key=lambda p: len(p.model), default=None)

    def overridden_by(self, other: PriceTable) -> PriceTable:
        """This table with `other`'s entries replacing or adding (provider, model) entries."""
        keys = {(p.provider, p.model) for p in other.models}
        kept = tuple(p for p in self.models if (p.provider, p.model) not in keys)
        return other.model_copy(update={"models": kept + other.models})


@cache
def shipped_price_table() -> PriceTable:
    """The price table shipped with pathgrade (read once)."""
    text = resources.files("pathgrade.detectors.data").joinpath(SHIPPED_TABLE).read_text()
    return PriceTable.model_validate_json(text)


def load_price_table(path: str | Path | None = None) -> PriceTable:
    """The shipped table, overridden by the user file at `path` when given."""
    shipped = shipped_price_table()
    if path is None:
        return shipped
    try:
        user = PriceTable.model_validate(json.loads(Path(path).read_text()))
    except (ValueError, ValidationError) as error:
        raise ValueError(f"{path}: invalid price table: {error}") from error
    return shipped.overridden_by(user)


def cost_usd(
    model: str, provider: str, input_tokens: int, output_tokens: int, table: PriceTable
) -> float | None:
    """USD cost of the tokens at list price; None when the model is not in `table`."""
    price = table.price_of(model, provider) or table.price_of(model)
    if price is None:
        return None
    return (
        input_tokens * price.input_usd_per_mtok + output_tokens * price.output_usd_per_mtok
    ) / 1_000_000
