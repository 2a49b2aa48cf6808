"""Similarity of answers: token-set Jaccard over responses and the mean over all pairs.

Shared by the per-trace scorers (answer consistency) and EDGE's determinism metrics.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import combinations
from statistics import fmean
from typing import Any, TypeVar

T = TypeVar("T")


def jaccard(left: set[Any], right: set[Any]) -> float:
    """|L ∩ R| / |L ∪ R|; two empty sets are identical (1.0)."""
    union = left | right
    return len(left & right) / len(union) if union else 1.0


def response_tokens(text: str) -> set[str]:
    """The lower-cased word tokens of a response (Unicode `\\w+` runs)."""
    return set(re.findall(r"\w+", text.lower()))


def lexical_similarity(left: str, right: str) -> float:
    """Token-set Jaccard similarity of two responses."""
    return jaccard(response_tokens(left), response_tokens(right))


def mean_pairwise(items: Sequence[T], similarity: Callable[[T, T], float]) -> float:
    """Mean similarity over all unordered pairs; a single item agrees with itself (1.0)."""
    pairs = list(combinations(items, 2))
    return fmean(similarity(a, b) for a, b in pairs) if pairs else 1.0
