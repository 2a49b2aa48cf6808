"""The monitors' unpaired bootstrap: a difference of two independent samples' means, drawn
from their histograms, is the interval that drawing their items one by one gives."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pathgrade.stats.bootstrap import WeightedSample, difference_interval


def reference_interval(
    current: list[float], baseline: list[float], resamples: int, seed: int
) -> tuple[float, float]:
    """Item by item: each sample drawn with replacement, 2.5th and 97.5th percentiles."""
    rng = random.Random(seed)

    def mean_of_draw(items: list[float]) -> float:
        return sum(items[rng.randrange(len(items))] for _ in items) / len(items)

    differences = sorted(mean_of_draw(current) - mean_of_draw(baseline) for _ in range(resamples))
    return differences[int(0.025 * resamples)], differences[int(0.975 * resamples) - 1]


def items(sample: dict[float, int]) -> list[float]:
    return [value for value, count in sample.items() for _ in range(count)]


SCORES_NOW = {0.5: 14, 0.75: 30, 1.0: 16}
SCORES_BEFORE = {0.5: 6, 0.75: 24, 1.0: 40}


def test_the_interval_matches_drawing_items_one_by_one() -> None:
    ours = difference_interval(
        WeightedSample.of(SCORES_NOW), WeightedSample.of(SCORES_BEFORE), resamples=20_000, seed=3
    )
    reference = reference_interval(items(SCORES_NOW), items(SCORES_BEFORE), 20_000, seed=4)
    assert ours == pytest.approx(reference, abs=0.006)
    assert ours[1] < 0  # these scores dropped by ~0.13: the interval says so


def test_the_interval_matches_scipys_independent_percentile_bootstrap() -> None:
    stats = pytest.importorskip("scipy.stats")
    now, before = np.array(items(SCORES_NOW)), np.array(items(SCORES_BEFORE))
    result = stats.bootstrap(
        (now, before),
        lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        method="percentile",
        n_resamples=20_000,
        rng=np.random.default_rng(5),
    )
    ours = difference_interval(
        WeightedSample.of(SCORES_NOW), WeightedSample.of(SCORES_BEFORE), resamples=20_000, seed=6
    )
    interval = result.confidence_interval
    assert ours == pytest.approx((interval.low, interval.high), abs=0.006)


def test_a_doubled_rate_is_beyond_noise_and_a_rate_within_noise_is_not() -> None:
    doubled = difference_interval(
        WeightedSample.proportion(100, 2000), WeightedSample.proportion(50, 2000)
    )
    assert 0 < doubled[0] < 0.025 < doubled[1]  # 5% against 2.5%: the whole interval above 0
    noisy = difference_interval(
        WeightedSample.proportion(13, 400), WeightedSample.proportion(10, 400)
    )
    assert noisy[0] < 0 < noisy[1]  # 3.25% against 2.5%: a ratio of 1.3, within noise


def test_the_same_seed_gives_the_same_interval_and_another_seed_another() -> None:
    now, before = WeightedSample.of(SCORES_NOW), WeightedSample.of(SCORES_BEFORE)
    first = difference_interval(now, before, resamples=2000, seed=1)
    assert difference_interval(now, before, resamples=2000, seed=1) == first
    assert difference_interval(now, before, resamples=2000, seed=2) != first


def test_a_wider_confidence_gives_a_wider_interval() -> None:
    now, before = WeightedSample.of(SCORES_NOW), WeightedSample.of(SCORES_BEFORE)
    narrow = difference_interval(now, before, resamples=4000, confidence=0.8)
    wide = difference_interval(now, before, resamples=4000, confidence=0.99)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_distinct_values_are_drawn_item_by_item_in_chunks() -> None:
    """3,000 distinct values (uniform on 0..1) x 2,000 resamples is past the memory bound:
    drawn item by item in chunks, the interval is the normal one of the difference."""
    rng = np.random.default_rng(9)
    values = {float(v): 1 for v in rng.uniform(0, 1, size=3000)}
    shifted = {value - 0.05: 1 for value in values}
    low, high = difference_interval(
        WeightedSample.of(shifted), WeightedSample.of(values), resamples=2000
    )
    assert low < -0.05 < high
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(2 / 12 / 3000), rel=0.1)


def test_few_distinct_values_are_drawn_as_multinomial_counts_of_the_same_law() -> None:
    """A rate of 30% over 10,000 turns (two values): the interval is the binomial one."""
    low, high = difference_interval(
        WeightedSample.proportion(3000, 10_000), WeightedSample.proportion(3000, 10_000)
    )
    assert -low == pytest.approx(high, rel=0.1)
    assert high == pytest.approx(1.96 * np.sqrt(2 * 0.3 * 0.7 / 10_000), rel=0.1)


def test_weighted_sample_mean_size_and_empty_values() -> None:
    sample = WeightedSample.of({1.0: 3, 0.0: 1, 0.5: 0})
    assert (sample.size, sample.mean()) == (4, 0.75)
    assert sample.values.tolist() == [0.0, 1.0]  # a value no item holds is left out
    with pytest.raises(ValueError, match="empty sample"):
        WeightedSample.of({}).mean()


@pytest.mark.parametrize(("hits", "items"), [(-1, 10), (11, 10)])
def test_a_proportion_with_hits_outside_its_items_is_refused(hits: int, items: int) -> None:
    with pytest.raises(ValueError, match="hits must be between 0 and items"):
        WeightedSample.proportion(hits, items)


def test_bad_arguments_are_refused_by_name() -> None:
    some, empty = WeightedSample.proportion(1, 2), WeightedSample.of({})
    with pytest.raises(ValueError, match="at least one item in each sample"):
        difference_interval(some, empty)
    with pytest.raises(ValueError, match="resamples must be at least 1"):
        difference_interval(some, some, resamples=0)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        difference_interval(some, some, confidence=1.0)
