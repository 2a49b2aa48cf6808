"""TraceAssembler: buffers the spans of each trace until it is due for evaluation.

Pure and clock-injected (`now` is monotonic seconds), so it is tested without Kafka. A trace
is due when its root span is present (spans are exported when they end) and no span came
for the quiet window, or when it is older than the maximum age (then `incomplete`). At the
memory bound the oldest traces are handed out early, also marked incomplete. Offsets that
may be committed stop at the lowest offset still held for each partition.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from schemas.model import Span, Trace

DueReason = Literal["quiet", "max_age", "memory"]
TraceKey = tuple[str, str]  # (tenant, trace id)


@dataclass(slots=True)
class _Pending:
    spans: list[Span]
    first_seen: float
    last_seen: float
    offsets: dict[int, int]  # partition -> lowest offset holding one of these spans
    has_root: bool
    evaluations: int  # times this trace was handed out before (late spans re-open it)


@dataclass(frozen=True, slots=True)
class DueTrace:
    """A trace to evaluate now, and why."""

    trace: Trace
    reason: DueReason
    re_evaluation: bool  # spans came after an earlier evaluation of this trace

    @property
    def incomplete(self) -> bool:
        return self.reason != "quiet"


@dataclass
class AssemblerStats:
    spans_added: int = 0
    traces_due: int = 0
    early_evaluations: int = 0  # max age or memory bound
    re_evaluations: int = 0


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
        for span in spans:
            key = (span.tenant, span.trace_id)
            pending = self._pending.get(key) or self._open(key, now)
            pending.spans.append(span)
            pending.last_seen = now
            pending.has_root = pending.has_root or span.is_root
            pending.offsets[partition] = min(pending.offsets.get(partition, offset), offset)
            self._span_count += 1

    def _open(self, key: TraceKey, now: float) -> _Pending:
        earlier, evaluations = self._recent.pop(key, ([], 0))
        has_root = any(span.is_root for span in earlier)
        pending = _Pending(list(earlier), now, now, {}, has_root, evaluations)
        self._pending[key] = pending
        self._span_count += len(earlier)
        return pending

    def due(self, now: float) -> list[DueTrace]:
        """Traces to evaluate now: quiet ones, too old ones, and the oldest beyond the bound."""
        ready: list[tuple[TraceKey, DueReason]] = []
        for key, pending in self._pending.items():
            if now - pending.first_seen >= self.max_age_s:
                ready.append((key, "max_age"))
            elif pending.has_root and now - pending.last_seen >= self.quiet_window_s:
                ready.append((key, "quiet"))
        out = [self._release(key, reason) for key, reason in ready]
        while self._pending and (
            len(self._pending) > self.max_traces or self._span_count > self.max_spans
        ):
            out.append(self._release(next(iter(self._pending)), "memory"))
        return out

    def forget_partitions(self, partitions: set[int]) -> int:
        """Drop every trace held for `partitions` (moved to another consumer, which re-reads
        them from the committed offset); returns how many were dropped."""
        keys = [k for k, p in self._pending.items() if partitions & p.offsets.keys()]
        for key in keys:
            self._span_count -= len(self._pending.pop(key).spans)
        for partition in partitions:
            self._next_offset.pop(partition, None)
        return len(keys)

    def _release(self, key: TraceKey, reason: DueReason) -> DueTrace:
        pending = self._pending.pop(key)
        self._span_count -= len(pending.spans)
        self._recent[key] = (pending.spans, pending.evaluations + 1)
        while len(self._recent) > self.recent_traces:
            self._recent.popitem(last=False)
        self.stats.traces_due += 1
        self.stats.early_evaluations += reason in ("max_age", "memory")
        self.stats.re_evaluations += pending.evaluations > 0
        trace = Trace(key[0], key[1], list(pending.spans))
        return DueTrace(trace, reason, pending.evaluations > 0)

    def committable(self) -> dict[int, int]:
        """Per partition, the next offset to commit: the lowest offset still held, else one
        past the last offset read."""
        out = dict(self._next_offset)
        for pending in self._pending.values():
            for partition, offset in pending.offsets.items():
                out[partition] = min(out.get(partition, offset), offset)
        return out
