"""Percentile bootstrap intervals of a mean difference.

`paired_bootstrap_intervals`: the release gate's, over per-item deltas of two runs of the
same dataset items (items resampled with replacement). `difference_interval`: the monitors',
over two independent samples (a current window of live traffic against a baseline window:
different turns, so each sample is resampled on its own). A sample is given as distinct
values with their counts (`WeightedSample`): drawing n items with replacement from n items
is drawing the counts of the distinct values from a multinomial, so a window of a million
turns with two outcomes costs as little as one of ten (a sample of mostly distinct values
is drawn item by item instead, which is cheaper for it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20_260_101
DEFAULT_CONFIDENCE = 0.95
_BOOTSTRAP_CHUNK_ELEMENTS = 1_000_000  # resample indices held in memory at once
MULTINOMIAL_COST = 8
"""A multinomial draw costs about this many index draws per distinct value: a sample with
more distinct values than its size over this is drawn item by item."""


def paired_bootstrap_intervals(
    deltas: Sequence[np.ndarray], *, resamples: int, seed: int, confidence: float
) -> list[tuple[float, float]]:
    """Percentile interval of the mean of each array of per-item deltas, resampling items
    with replacement.

    Every array is resampled from a generator seeded with `seed`, so its interval does not
    depend on the other arrays; arrays of equal length share their index draws (one
    gather over a stacked matrix), which is the vectorised fast path. Chunks of resamples
    bound the memory.
    """
    intervals: list[tuple[float, float]] = [(0.0, 0.0)] * len(deltas)
    positions_by_size: dict[int, list[int]] = defaultdict(list)
    for position, array in enumerate(deltas):
        if np.size(array) == 0:
            raise ValueError("paired bootstrap needs at least one item")
        positions_by_size[np.size(array)].append(position)
    tail = (1.0 - confidence) / 2.0 * 100.0
    for positions in positions_by_size.values():
        stacked = np.array([deltas[p] for p in positions], dtype=np.float64)
        statistics = _bootstrap_means(stacked, resamples=resamples, seed=seed)
        bounds = np.percentile(statistics, [tail, 100.0 - tail], axis=1)
        for position, low, high in zip(positions, bounds[0], bounds[1], strict=True):
            intervals[position] = (float(low), float(high))
    return intervals


def paired_bootstrap_interval(
    deltas: np.ndarray, *, resamples: int, seed: int, confidence: float
) -> tuple[float, float]:
    """`paired_bootstrap_intervals` for a single array of per-item deltas."""
    (interval,) = paired_bootstrap_intervals(
        [deltas], resamples=resamples, seed=seed, confidence=confidence
    )
    return interval


def _bootstrap_means(stacked: np.ndarray, *, resamples: int, seed: int) -> np.ndarray:
    """(rows, resamples) means of `stacked` (rows, items) over items drawn with replacement."""
    rows, n = stacked.shape
    rng = np.random.default_rng(seed)
    means = np.empty((rows, resamples), dtype=np.float64)
    chunk = max(1, _BOOTSTRAP_CHUNK_ELEMENTS // (n * rows))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        indices = rng.integers(0, n, size=(stop - start, n), dtype=np.int32)
        means[:, start:stop] = stacked[:, indices].mean(axis=2)
    return means


@dataclass(frozen=True)
class WeightedSample:
    """A sample as its distinct values and how many items hold each (a histogram)."""

    values: np.ndarray  # float64, one per distinct value
    counts: np.ndarray  # int64, items holding each value

    @classmethod
    def of(cls, counts: dict[float, int]) -> WeightedSample:
        """From value -> count (values with no items are left out)."""
        kept = sorted((value, count) for value, count in counts.items() if count > 0)
        return cls(
            np.array([value for value, _ in kept], dtype=np.float64),
            np.array([count for _, count in kept], dtype=np.int64),
        )

    @classmethod
    def proportion(cls, hits: int, items: int) -> WeightedSample:
        """`items` items of which `hits` are 1 and the rest 0 (a rate as a sample)."""
        if not 0 <= hits <= items:
            raise ValueError(f"hits must be between 0 and items ({items}), got {hits}")
        return cls.of({1.0: hits, 0.0: items - hits})

    @property
    def size(self) -> int:
        return int(self.counts.sum())

    def mean(self) -> float:
        """The sample's mean; ValueError when it holds no item."""
        if self.size == 0:
            raise ValueError("the mean of an empty sample")
        return float(self.values @ self.counts / self.size)


def difference_interval(
    current: WeightedSample,
    baseline: WeightedSample,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float]:
    """Percentile interval of mean(current) - mean(baseline), each sample's items drawn
    with replacement on their own (an unpaired bootstrap). Raises ValueError for an empty
    sample, fewer than one resample or a confidence outside (0, 1)."""
    if current.size == 0 or baseline.size == 0:
        raise ValueError("a difference interval needs at least one item in each sample")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    rng = np.random.default_rng(seed)
    differences = _resampled_means(current, resamples, rng) - _resampled_means(
        baseline, resamples, rng
    )
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(differences, [tail, 100.0 - tail])
    return float(low), float(high)


def _resampled_means(
    sample: WeightedSample, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """`resamples` means of `sample`'s items drawn with replacement, in chunks that bound
    the memory: as multinomial counts of its distinct values when it has few of them for
    its size (a rate: two), else as indices into its items."""
    n = sample.size
    few_values = sample.values.size * MULTINOMIAL_COST <= n
    items = None if few_values else np.repeat(sample.values, sample.counts)
    width = sample.values.size if few_values else n
    means = np.empty(resamples, dtype=np.float64)
    chunk = max(1, _BOOTSTRAP_CHUNK_ELEMENTS // width)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        if items is None:
            drawn = rng.multinomial(n, sample.counts / n, size=stop - start)
            means[start:stop] = drawn @ sample.values / n
        else:
            means[start:stop] = items[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    return means
