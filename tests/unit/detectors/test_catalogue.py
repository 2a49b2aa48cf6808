"""The detector catalogue (docs/detectors.md) shows a default as it is up to 60
characters (LONG_DEFAULT), and a longer one as `(see source)`, and lists every shared key
of the policy; the parameters it documents are validated (a claim is a regex)."""

from __future__ import annotations

import pytest
from pathgrade.detectors.catalogue import _default, render
from pathgrade.detectors.output import ClaimParams
from pydantic import ValidationError


def test_a_default_up_to_the_limit_is_shown_and_a_longer_one_is_not() -> None:
    assert _default("x" * 60) == "x" * 60
    assert _default("x" * 61) == "(see source)"
    assert _default(frozenset({"b", "a"})) == "['a', 'b']"
    assert _default(("a",)) == "['a']"


def test_every_shared_key_of_the_policy_is_listed_with_its_fields() -> None:
    catalogue = render()
    for name in ("tools", "identity", "idempotency", "requests"):
        assert f"- `{name}`: " in catalogue
    assert "  - `irreversible`" in catalogue  # a field of `tools`


def test_a_claim_that_is_not_a_regular_expression_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"claims[\s\S]*invalid regular expression '\('"):
        ClaimParams(claims={"(": ("refund",)})
