"""The generated tests' example counts: scaled by PATHGRADE_EXAMPLES_SCALE, a bad scale named."""

import pytest

from tests.support.examples import SCALE_VARIABLE, examples


def test_the_count_is_as_written_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCALE_VARIABLE, raising=False)
    assert examples(150) == 150


def test_the_variable_scales_every_count_and_keeps_at_least_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SCALE_VARIABLE, "10")
    assert examples(150) == 1500
    monkeypatch.setenv(SCALE_VARIABLE, "0.001")
    assert examples(150) == 1


@pytest.mark.parametrize("scale", ["0", "-2", "ten", "nan"])
def test_a_scale_that_is_not_positive_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, scale: str
) -> None:
    monkeypatch.setenv(SCALE_VARIABLE, scale)
    with pytest.raises(ValueError, match=f"{SCALE_VARIABLE}=.*must be a positive number"):
        examples(150)
