"""Retrieval metrics: context precision and context recall as RAGAS and DeepEval define
them. Pure functions: no I/O, no model.

- `context_precision(verdicts)`: the rank-weighted precision of the retrieved chunks,
  `sum_k precision@k * v_k / sum_k v_k` over the chunks in retrieval order (`v_k` 1 when
  chunk k is relevant): RAGAS `ContextPrecision` / `LLMContextPrecisionWith(out)Reference`
  / `NonLLMContextPrecisionWithReference` and DeepEval `ContextualPrecisionMetric`. 0.0
  when no chunk is relevant (both libraries).
- `context_recall(verdicts)`: the share of reference units (the reference answer's
  statements, or the reference contexts) the retrieved chunks support: RAGAS
  `ContextRecall` / `NonLLMContextRecall` and DeepEval `ContextualRecallMetric`.

Where the relevance comes from:
- reference ids (`precision_by_ids`, `recall_by_ids`): RAGAS `IDBasedContextPrecision` and
  `IDBasedContextRecall`, over sets of ids compared as text;
- reference contexts (`precision_by_text`, `recall_by_text`): RAGAS's non-LLM metrics, a
  retrieved and a reference context alike when `1 - normalised Levenshtein distance`
  (rapidfuzz, the measure RAGAS uses) reaches the threshold (0.5; `>=` for precision, `>`
  for recall, as RAGAS has it);
- a judge, where no reference context exists: one verdict per chunk (was it useful to
  arrive at the answer: rubric `context_precision`) or per statement of the reference
  answer (`statements`; can it be attributed to the retrieved context: rubric
  `context_recall`), which the two functions above turn into the score
  (`batch_plane.evaluation.judged_retrieval` asks the judge).

docs/trajectory.md lists where pathgrade differs from either library and the published
vectors the tests reproduce.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rapidfuzz.distance import Levenshtein

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

SIMILARITY_THRESHOLD = 0.5
"""RAGAS's default threshold of its non-LLM context precision and recall."""


def context_precision(verdicts: Sequence[bool | int]) -> float:
    """Rank-weighted precision of chunks in retrieval order (`verdicts[k]`: chunk k is
    relevant); 0.0 when none is, or there is none."""
    relevant = 0
    weighted = 0.0
    for rank, verdict in enumerate(_binary(verdicts, "verdicts"), start=1):
        if verdict:
            relevant += 1
            weighted += relevant / rank
    return weighted / relevant if relevant else 0.0


def context_recall(verdicts: Sequence[bool | int]) -> float | None:
    """Share of the reference units the retrieved context supports (`verdicts[i]`: unit
    i is supported); None when there is no unit to support (RAGAS: NaN; DeepEval: 0)."""
    flags = _binary(verdicts, "verdicts")
    return sum(flags) / len(flags) if flags else None


def precision_by_ids(retrieved: Iterable[object], reference: Iterable[object]) -> float | None:
    """Share of the distinct retrieved ids that are reference ids (ids compared as text);
    None when nothing was retrieved (RAGAS: NaN)."""
    found = {str(i) for i in retrieved}
    wanted = {str(i) for i in reference}
    return len(found & wanted) / len(found) if found else None


def recall_by_ids(retrieved: Iterable[object], reference: Iterable[object]) -> float | None:
    """Share of the distinct reference ids among the retrieved ids; None when there is no
    reference id (RAGAS: NaN)."""
    found = {str(i) for i in retrieved}
    wanted = {str(i) for i in reference}
    return len(found & wanted) / len(wanted) if wanted else None


def similarity(a: str, b: str) -> float:
    """1 - the normalised Levenshtein distance of two texts (1.0: equal)."""
    return 1.0 - Levenshtein.normalized_distance(a, b)


def precision_by_text(
    retrieved: Sequence[str], reference: Sequence[str], threshold: float = SIMILARITY_THRESHOLD
) -> float | None:
    """`context_precision` with a retrieved chunk relevant when its best similarity to a
    reference context reaches `threshold`; None without a reference context."""
    if not reference:
        return None
    best = [max(similarity(chunk, ref) for ref in reference) for chunk in retrieved]
    return context_precision([score >= threshold for score in best])


def recall_by_text(
    retrieved: Sequence[str], reference: Sequence[str], threshold: float = SIMILARITY_THRESHOLD
) -> float | None:
    """`context_recall` with a reference context found when its best similarity to a
    retrieved chunk exceeds `threshold` (0.0 when nothing was retrieved); None without a
    reference context."""
    if not reference:
        return None
    best = [max((similarity(chunk, ref) for chunk in retrieved), default=0.0) for ref in reference]
    return context_recall([score > threshold for score in best])


def statements(text: str) -> list[str]:
    """The sentences of `text` (split after `.`, `!` or `?` and a space, and at line
    breaks), stripped, empty ones left out: the units `context_recall` grades."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def _binary(verdicts: Sequence[bool | int], name: str) -> list[int]:
    """The verdicts as 0/1; ValueError names the first that is neither."""
    flags = []
    for index, verdict in enumerate(verdicts):
        if verdict not in (0, 1) or isinstance(verdict, float):
            raise ValueError(f"{name}[{index}]: expected true/false or 1/0, got {verdict!r}")
        flags.append(int(verdict))
    return flags
