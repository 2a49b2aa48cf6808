"""TraceAssembler: buffers the spans of each trace until it is due for evaluation.

Pure and clock-injected (`now` is monotonic seconds), so it is tested without Kafka. A trace
is due when its root span is present (spans are exported when they end) and no span came
for the quiet window, or when it is older than the maximum age (then `incomplete`). At the
memory bound the oldest traces are handed out early, also marked incomplete. Offsets that
may be committed stop at the lowest offset still held for each partition. A span read
again (at-least-once delivery sends a message twice after a collector restart) is
counted and left out, so it neither doubles a trace nor re-opens an evaluated one.

Due detection and committable offsets are incremental, so a poll costs what changed, not
the number of traces held: `_pending` is in opening order (max age and memory bound take
from its front), quiet deadlines sit in a heap pushed on add, and held offsets in a heap
per partition; stale heap entries are skipped lazily and the offset heaps are compacted
when mostly stale.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from typing import Literal

from pathgrade.schemas.model import Span, Trace

DueReason = Literal["quiet", "max_age", "memory", "drain"]
TraceKey = tuple[str, str]  # (tenant, trace id)
_TRACE_KEY = attrgetter("tenant", "trace_id")
"""A span's TraceKey."""


@dataclass(slots=True)
class _Pending:
    spans: list[Span]
    first_seen: float
    last_seen: float
    offsets: dict[int, int]  # partition -> lowest offset holding one of these spans
    has_root: bool
    evaluations: int  # times this trace was handed out before (late spans re-open it)
    span_ids: set[str]


@dataclass(frozen=True, slots=True)
class DueTrace:
    """A trace to evaluate now, and why."""

    trace: Trace
    reason: DueReason
    re_evaluation: bool  # spans came after an earlier evaluation of this trace
    partition: int = -1  # the partition its spans were read from (the lowest, if several)

    @property
    def incomplete(self) -> bool:
        return self.reason != "quiet"


@dataclass
class AssemblerStats:
    spans_added: int = 0
    traces_due: int = 0
    early_evaluations: int = 0  # max age or memory bound
    re_evaluations: int = 0
    duplicate_spans: int = 0  # read again (same trace and span id): left out


@dataclass
class TraceAssembler:
    """Per-trace span buffers with quiet-window, max-age and memory-bound release."""

    quiet_window_s: float = 1.0
    max_age_s: float = 300.0
    max_traces: int = 50_000
    max_spans: int = 1_000_000
    recent_traces: int = 10_000
    stats: AssemblerStats = field(default_factory=AssemblerStats)

    def __post_init__(self) -> None:
        self._pending: OrderedDict[TraceKey, _Pending] = OrderedDict()  # oldest first
        self._recent: OrderedDict[TraceKey, tuple[list[Span], int]] = OrderedDict()
        self._next_offset: dict[int, int] = {}
        self._span_count = 0
        self._deadlines: list[tuple[float, TraceKey]] = []  # may hold stale entries
        self._held: dict[int, list[tuple[int, TraceKey]]] = {}  # partition -> offset heap

    @property
    def traces_held(self) -> int:
        return len(self._pending)

    @property
    def spans_held(self) -> int:
        return self._span_count

    def add(self, partition: int, offset: int, spans: list[Span], now: float) -> None:
        """Buffer the spans of one message (read at `partition`, `offset`)."""
        self._next_offset[partition] = max(self._next_offset.get(partition, 0), offset + 1)
        self.stats.spans_added += len(spans)
        touched: dict[TraceKey, _Pending] = {}
        # A message holds the spans of one trace (the collector groups them): its buffer is
        # looked up once per run of spans of one trace, not once per span.
        for key, run in groupby(spans, _TRACE_KEY):
            pending = touched.get(key) or self._pending.get(key)
            for span in run:
                if pending is None:
                    if self._evaluated_with(key, span.span_id):
                        self.stats.duplicate_spans += 1
                        continue
                    pending = self._open(key, now)
                if span.span_id in pending.span_ids:
                    self.stats.duplicate_spans += 1
                    continue
                touched[key] = pending
                pending.span_ids.add(span.span_id)
                pending.spans.append(span)
                if not span.parent_span_id:  # `span.is_root`, without a property call
                    pending.has_root = True
                self._span_count += 1
        for key, pending in touched.items():
            pending.last_seen = now
            if pending.has_root:
                heapq.heappush(self._deadlines, (now + self.quiet_window_s, key))
            if offset < pending.offsets.get(partition, offset + 1):
                pending.offsets[partition] = offset
                heapq.heappush(self._held.setdefault(partition, []), (offset, key))

    def _evaluated_with(self, key: TraceKey, span_id: str) -> bool:
        """Whether the recently evaluated trace `key` already had span `span_id`."""
        earlier = self._recent.get(key)
        return earlier is not None and any(span.span_id == span_id for span in earlier[0])

    def _open(self, key: TraceKey, now: float) -> _Pending:
        earlier, evaluations = self._recent.pop(key, ([], 0))
        has_root = any(span.is_root for span in earlier)
        ids = {span.span_id for span in earlier}
        pending = _Pending(list(earlier), now, now, {}, has_root, evaluations, ids)
        self._pending[key] = pending
        self._span_count += len(earlier)
        return pending

    def due(self, now: float) -> list[DueTrace]:
        """Traces to evaluate now: quiet ones, too old ones, and the oldest beyond the bound."""
        out = []
        while self._pending and now - self._oldest()[1].first_seen >= self.max_age_s:
            out.append(self._release(self._oldest()[0], "max_age"))
        while self._deadlines and self._deadlines[0][0] <= now:
            key = heapq.heappop(self._deadlines)[1]
            if self._quiet(key, now):
                out.append(self._release(key, "quiet"))
        while self._pending and (
            len(self._pending) > self.max_traces or self._span_count > self.max_spans
        ):
            out.append(self._release(self._oldest()[0], "memory"))
        return out

    def release_all(self) -> list[DueTrace]:
        """Every held trace, now: the consumer is closing and its broker may be replaced,
        so nothing held can wait for a re-read. A trace with its root counts as complete
        (reason "quiet"), one without is marked incomplete (reason "drain")."""
        return [
            self._release(key, "quiet" if pending.has_root else "drain")
            for key, pending in list(self._pending.items())
        ]

    def _oldest(self) -> tuple[TraceKey, _Pending]:
        """The trace opened first (`_pending` is in opening order, the clock is monotonic)."""
        return next(iter(self._pending.items()))

    def _quiet(self, key: TraceKey, now: float) -> bool:
        """The trace at `key` is still held, has its root, and got no span for the window."""
        pending = self._pending.get(key)
        return (
            pending is not None
            and pending.has_root
            and now - pending.last_seen >= self.quiet_window_s
        )

    def forget_partitions(self, partitions: set[int]) -> int:
        """Drop every trace held for `partitions` (moved to another consumer, which re-reads
        them from the committed offset); returns how many were dropped."""
        keys = [k for k, p in self._pending.items() if partitions & p.offsets.keys()]
        for key in keys:
            self._span_count -= len(self._pending.pop(key).spans)
        for partition in partitions:
            self._next_offset.pop(partition, None)
            self._held.pop(partition, None)
        return len(keys)

    def _release(self, key: TraceKey, reason: DueReason) -> DueTrace:
        pending = self._pending.pop(key)
        self._span_count -= len(pending.spans)
        self._recent[key] = (pending.spans, pending.evaluations + 1)
        while len(self._recent) > self.recent_traces:
            self._recent.popitem(last=False)
        self.stats.traces_due += 1
        self.stats.early_evaluations += reason != "quiet"
        self.stats.re_evaluations += pending.evaluations > 0
        trace = Trace(key[0], key[1], list(pending.spans))
        partition = min(pending.offsets, default=-1)
        return DueTrace(trace, reason, pending.evaluations > 0, partition)

    def committable(self) -> dict[int, int]:
        """Per partition, the next offset to commit: the lowest offset still held, else one
        past the last offset read."""
        out = dict(self._next_offset)
        if sum(map(len, self._held.values())) > 4 * len(self._pending) + 1024:
            self._compact_held()
        for partition, held in self._held.items():
            while held and not self._holds(held[0][1], partition, held[0][0]):
                heapq.heappop(held)
            if held:
                out[partition] = held[0][0]
        return out

    def _compact_held(self) -> None:
        """Rebuild the offset heaps from the traces still held."""
        self._held = {partition: [] for partition in self._held}
        for key, pending in self._pending.items():
            for partition, offset in pending.offsets.items():
                self._held.setdefault(partition, []).append((offset, key))
        for held in self._held.values():
            heapq.heapify(held)

    def _holds(self, key: TraceKey, partition: int, offset: int) -> bool:
        pending = self._pending.get(key)
        return pending is not None and pending.offsets.get(partition) == offset
