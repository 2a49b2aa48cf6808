"""The detector catalogue (docs/detectors.md) shows a default as it is up to 60
characters (LONG_DEFAULT), and a longer one as `(see source)`."""

from __future__ import annotations

from pathgrade.detectors.catalogue import _default, render


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
