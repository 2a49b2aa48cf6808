"""TurnAssembler: buffers the spans of each trace and hands out its agent turns as they
fall due.

Pure and clock-injected (`now` is monotonic seconds), so it is tested without Kafka. The
turns of a trace are found as its spans arrive (`content.agent_turns`). A turn is due when
its top span has arrived, no span of it (or of its context) came for the quiet window, and
its boundary (the outermost span arrived at or above its top) is settled, whether or not
the trace's root ever arrives:

- the boundary has no parent, or its parent is remote (OTLP span flags): settled;
- its parent is missing and the exporter set no flags: settled once the parent did not
  arrive within the quiet window;
- its parent is missing and local (flags): an agent turn waits `parent_wait_s` for it (the
  OTel SDK's batch processor exports every 5 s, so an enclosing span that ended just after
  the turn comes in the next export); a trace without agents waits for it up to the
  maximum age.

A trace older than the maximum age hands out every turn not yet graded as it is (then
`incomplete`), and so does the memory bound for the oldest traces; loose GenAI spans (a
model or tool call whose agent span never came) are then graded as a turn of their own.
Turns of one conversation are handed out in start order: a due turn waits while a turn of
its conversation (of its trace, or another) that started earlier is still held, so
verdicts that read earlier turns (a confirmation) do not depend on arrival order; it waits
`parent_wait_s` at most. Offsets that may be committed stop at the
lowest offset still held for each partition. A span read again (at-least-once delivery)
is counted and left out; a span arriving after its turn was graded re-opens the trace with
its earlier spans, and the turns it changed are graded again. A graded trace is remembered
for that (the last `recent_traces`, at most `recent_spans` spans and records over them,
the oldest forgotten first) by what it was read from, not by its spans: the messages its
spans came in (`add`'s `source`), which `expand` reads again when a late span re-opens it
(a span read from a message costs about 7 times its encoded size as objects).

Log records (GenAI events as records, `pathgrade.logs`) are held with their trace and
joined to their spans when a turn is handed out (`content.events.join_records`), whichever
came first: a record counts as activity of its span (a turn waits for the records of its
spans within its quiet window), a trace whose records came before their spans waits for
them (up to the maximum age), and a record arriving after its turn was graded re-opens
the trace like a late span (the turn is graded again with it). Records read again are left
out; their offsets are held and committed as the spans' are (`committable_records`).

Due detection is incremental: `_held` is in opening order (max age and memory bound take
from its front), wake-up times sit in a heap pushed on add, and held offsets in a heap per
partition; stale heap entries are skipped lazily and the offset heaps are compacted when
mostly stale.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from typing import Literal, cast

from pathgrade.content.agent_turns import TurnLayout, TurnShape, loose_turn, turn_layout
from pathgrade.content.events import join_records
from pathgrade.realtime_plane.counters import AssemblerStats
from pathgrade.schemas.model import LogRecord, Span, Trace

DueReason = Literal["quiet", "max_age", "memory", "drain"]
TraceKey = tuple[str, str]  # (tenant, trace id)
ConversationKey = tuple[str, str]  # (tenant, conversation id)
_TRACE_KEY = attrgetter("tenant", "trace_id")
"""A span's TraceKey."""


@dataclass(slots=True)
class _Held:
    """One trace's spans while any of them may still be (part of) a turn to grade."""

    spans: list[Span]
    arrived: dict[str, float]  # span id -> when it was added
    first_seen: float
    last_seen: float
    offsets: dict[int, int]  # partition -> lowest offset holding one of these spans
    graded: dict[str, tuple[int, int]]  # top span id -> the turn's size when last graded
    conversation: str = ""
    open_start: float = math.inf  # earliest start of a span not yet graded as it is
    layout: TurnLayout | None = None  # of the spans as they were when it was last found
    records: dict[str, list[LogRecord]] = field(default_factory=dict)  # by span id
    record_keys: set[tuple[object, ...]] = field(default_factory=set)  # to leave re-reads out
    record_arrived: dict[str, float] = field(default_factory=dict)  # span id -> latest
    record_offsets: dict[int, int] = field(default_factory=dict)  # as `offsets`, of records
    sources: list[object] = field(default_factory=list)  # what `spans` were read from

    @property
    def size(self) -> int:
        """Spans and records held (or remembered) of the trace."""
        return len(self.arrived) + len(self.record_keys)

    def turns(self) -> TurnLayout:
        """The trace's layout (`content.agent_turns`), found again only when spans came."""
        layout = self.layout
        if layout is None or layout.spans != len(self.spans):
            layout = self.layout = turn_layout(self.spans)
        return layout


@dataclass(frozen=True, slots=True)
class DueTurn:
    """A turn to evaluate now, and why."""

    turn: Trace  # the turn's spans, top and context
    reason: DueReason
    re_evaluation: bool  # graded before, and spans of it (or its context) came since
    partition: int = -1  # the partition its trace was read from (the lowest, if several)

    @property
    def incomplete(self) -> bool:
        return self.reason != "quiet"

    @property
    def context_pending(self) -> bool:
        """Graded quiet while the span enclosing it is local and has not arrived (a session
        span that ends with the conversation, `Trace.context_pending`): it is graded again
        with that span when it comes."""
        return self.reason == "quiet" and self.turn.context_pending


@dataclass
class TurnAssembler:
    """Per-trace span buffers; turns released by quiet window, max age and memory bound."""

    quiet_window_s: float = 1.0
    max_age_s: float = 300.0
    max_traces: int = 50_000
    max_spans: int = 1_000_000
    recent_traces: int = 10_000
    parent_wait_s: float = 5.0
    recent_spans: int = 200_000
    expand: Callable[[object], list[Span]] = field(default=lambda source: cast(list[Span], source))
    """The spans of one `source` given to `add` (by default the list of spans itself)."""
    stats: AssemblerStats = field(default_factory=AssemblerStats)

    def __post_init__(self) -> None:
        self._held: OrderedDict[TraceKey, _Held] = OrderedDict()  # oldest first
        self._recent: OrderedDict[TraceKey, _Held] = OrderedDict()  # spans left out
        self._recent_size = 0  # spans and records of `_recent`
        self._span_count = 0
        self._record_count = 0
        self._wakes: list[tuple[float, TraceKey]] = []  # may hold stale entries
        self._spans = _Offsets(self._held, attrgetter("offsets"))
        self._records = _Offsets(self._held, attrgetter("record_offsets"))
        self._conversations: dict[ConversationKey, set[TraceKey]] = {}
        self._waiting: dict[ConversationKey, set[TraceKey]] = {}  # held back by an earlier turn

    @property
    def traces_held(self) -> int:
        return len(self._held)

    @property
    def spans_held(self) -> int:
        return self._span_count

    @property
    def records_held(self) -> int:
        return self._record_count

    def add(
        self, partition: int, offset: int, spans: list[Span], now: float, source: object = None
    ) -> None:
        """Buffer the spans of one message (read at `partition`, `offset`); `source` is
        what they were read from (`expand(source)` reads them again; default: `spans`)."""
        self._spans.read(partition, offset)
        source = spans if source is None else source
        self.stats.spans_added += len(spans)
        touched: dict[TraceKey, _Held] = {}
        # A message holds the spans of one trace (the collector groups them): its buffer is
        # looked up once per run of spans of one trace, not once per span.
        for key, run in groupby(spans, _TRACE_KEY):
            held = touched.get(key) or self._held.get(key)
            added = []
            for span in run:
                if held is None:
                    earlier = self._recent.get(key)
                    if earlier is not None and span.span_id in earlier.arrived:
                        self.stats.duplicate_spans += 1
                        continue
                    held = self._open(key, now)
                if span.span_id in held.arrived:
                    self.stats.duplicate_spans += 1
                    continue
                held.arrived[span.span_id] = now
                added.append(span)
            if not added:
                continue
            assert held is not None
            touched[key] = held
            held.spans += added
            held.sources.append(source)
            self._span_count += len(added)
            held.open_start = min(held.open_start, min(s.start_ns for s in added))
            if not held.conversation:
                self._note_conversation(key, held, added)
        self._touched(touched, partition, offset, now, self._spans)

    def add_records(
        self, partition: int, offset: int, records: list[LogRecord], now: float
    ) -> None:
        """Buffer the log records of one message (read at `partition`, `offset` of the
        records' topic); records tied to no span (no trace or span id) are left out."""
        self._records.read(partition, offset)
        touched: dict[TraceKey, _Held] = {}
        for record in records:
            if not record.span_id:
                continue
            key = (record.tenant, record.trace_id)
            held = touched.get(key) or self._held.get(key)
            identity = _record_identity(record)
            if held is None:
                earlier = self._recent.get(key)
                if earlier is not None and identity in earlier.record_keys:
                    self.stats.duplicate_records += 1
                    continue
                held = self._open(key, now)
            if identity in held.record_keys:
                self.stats.duplicate_records += 1
                continue
            held.record_keys.add(identity)
            held.records.setdefault(record.span_id, []).append(record)
            held.record_arrived[record.span_id] = now
            self._record_count += 1
            self.stats.records_added += 1
            touched[key] = held
        self._touched(touched, partition, offset, now, self._records)

    def _touched(
        self, touched: dict[TraceKey, _Held], partition: int, offset: int, now: float,
        offsets: _Offsets,
    ) -> None:  # fmt: skip
        """After a message added to the traces `touched`: their quiet windows start again,
        and `offset` is held for them in `offsets`."""
        for key, held in touched.items():
            held.last_seen = now
            heapq.heappush(self._wakes, (now + self.quiet_window_s, key))
            offsets.hold(key, held, partition, offset)

    def _note_conversation(self, key: TraceKey, held: _Held, spans: list[Span]) -> None:
        """The trace's conversation, from the first of `spans` that names one."""
        conversation = next((s.genai.conversation_id for s in spans if s.genai.conversation_id), "")
        if conversation:
            held.conversation = conversation
            self._conversations.setdefault((key[0], conversation), set()).add(key)

    def _open(self, key: TraceKey, now: float) -> _Held:
        """The buffer of trace `key`: new, or re-opened with its recently graded spans."""
        earlier = self._recent.pop(key, None)
        if earlier is None:
            held = _Held([], {}, now, now, {}, {})
        else:
            self._recent_size -= earlier.size
            held = _Held(self._read_again(key, earlier), earlier.arrived, now, now, {},
                         earlier.graded, earlier.conversation, records=earlier.records,
                         record_keys=earlier.record_keys,
                         record_arrived=earlier.record_arrived,
                         sources=earlier.sources)  # fmt: skip
            self._span_count += len(held.spans)
            self._record_count += sum(map(len, held.records.values()))
            if held.conversation:
                self._conversations.setdefault((key[0], held.conversation), set()).add(key)
        self._held[key] = held
        return held

    def _read_again(self, key: TraceKey, earlier: _Held) -> list[Span]:
        """The spans of remembered trace `key`, read again from their sources: those it
        held, each once, in the order they were added."""
        arrived, spans, seen = earlier.arrived, [], set()
        for source in earlier.sources:
            for span in self.expand(source):
                span_id = span.span_id
                if span_id in arrived and span_id not in seen and _TRACE_KEY(span) == key:
                    seen.add(span_id)
                    spans.append(span)
        return spans

    def next_due(self) -> float:
        """The clock time at which `due` may next release a turn if no span arrives before:
        the earliest wake-up (perhaps of a trace already gone: early, never late) or the
        oldest trace's maximum age; infinity with nothing held."""
        if not self._held:
            return math.inf
        wake = self._wakes[0][0] if self._wakes else math.inf
        return min(wake, self._oldest()[1].first_seen + self.max_age_s)

    def due(self, now: float) -> list[DueTurn]:
        """Turns to evaluate now: quiet ones, those of too old traces, and those of the
        oldest traces beyond the memory bound."""
        out: list[DueTurn] = []
        while self._held and now - self._oldest()[1].first_seen >= self.max_age_s:
            out += self._release_all_of(self._oldest()[0], "max_age")
        while self._wakes and self._wakes[0][0] <= now:
            key = heapq.heappop(self._wakes)[1]
            if key in self._held:
                out += self._release_due(key, now)
        while self._held and (
            len(self._held) > self.max_traces
            or self._span_count + self._record_count > self.max_spans
        ):
            out += self._release_all_of(self._oldest()[0], "memory")
        return out

    def release_all(self) -> list[DueTurn]:
        """Every turn held, now: the consumer is closing and its broker may be replaced,
        so nothing held can wait for a re-read. A turn whose boundary is settled counts as
        complete (reason "quiet"), any other is marked incomplete (reason "drain")."""
        out: list[DueTurn] = []
        for key in list(self._held):
            out += self._release_all_of(key, "drain")
        return out

    def _oldest(self) -> tuple[TraceKey, _Held]:
        """The trace opened first (`_held` is in opening order, the clock is monotonic)."""
        return next(iter(self._held.items()))

    def _release_due(self, key: TraceKey, now: float) -> list[DueTurn]:
        """The turns of trace `key` due at `now`; the trace leaves the buffer when nothing
        of it may still come to a turn, else a wake-up is set for its next due time."""
        held = self._held[key]
        layout = held.turns()
        out: list[DueTurn] = []
        wake, waiting = math.inf, False
        for shape in layout.turns:
            if held.graded.get(shape.top.span_id) == _size(shape, held):
                continue
            ready = self._ready_at(shape, held, layout.agents)
            if ready > now:
                waiting = True  # and the trace's later turns wait for this one
                wake = min(wake, ready)
                continue
            patient = now - ready < self.parent_wait_s  # a due turn waits this long at most
            if patient and (waiting or self._held_back(key, held, shape)):
                waiting = True
                wake = min(wake, ready + self.parent_wait_s)
                continue
            out.append(self._grade(key, held, shape, "quiet"))
        for boundary, _ in layout.loose.values():
            settles = self._settles_at(boundary, held, agent=False)
            if settles > now:
                waiting = True
                wake = min(wake, settles)
        if not held.records.keys() <= held.arrived.keys():
            waiting = True  # records wait for their spans, up to the maximum age
        self._after_grading(key, held, layout, out)
        if not waiting:
            self._close(key)
        elif wake < math.inf:
            heapq.heappush(self._wakes, (wake, key))
        return out

    def _release_all_of(self, key: TraceKey, reason: DueReason) -> list[DueTurn]:
        """Every turn of trace `key` not graded as it is, and its loose spans as turns of
        their own, now (max age, memory bound, drain); the trace leaves the buffer."""
        held = self._held[key]
        layout = held.turns()
        out = []
        for shape in layout.turns:
            if held.graded.get(shape.top.span_id) != _size(shape, held):
                settled = self._settles_at(shape.boundary, held, layout.agents) < math.inf
                quiet = reason == "drain" and settled
                out.append(self._grade(key, held, shape, "quiet" if quiet else reason))
        for boundary, spans in layout.loose.values():
            if self._settles_at(boundary, held, agent=False) == math.inf:
                out.append(self._grade(key, held, loose_turn(spans), reason))
        self._after_grading(key, held, layout, out)
        self._close(key)
        return out

    def _ready_at(self, shape: TurnShape, held: _Held, agent: bool) -> float:
        """When the turn (an agent turn when `agent`) is due: quiet, and its boundary
        settled (inf: not before the maximum age)."""
        arrived = held.arrived
        activity = max(arrived[s.span_id] for s in shape.spans)
        if shape.context:
            activity = max(activity, max(arrived[s.span_id] for s in shape.context))
        if held.record_arrived:
            latest = held.record_arrived
            activity = max(
                activity, *(latest.get(s.span_id, activity) for s in (*shape.spans, *shape.context))
            )
        return max(activity + self.quiet_window_s, self._settles_at(shape.boundary, held, agent))

    def _settles_at(self, boundary: Span, held: _Held, agent: bool) -> float:
        """When a boundary stops waiting for its parent: at once without one or with a
        remote one; a quiet window after it arrived when the exporter did not say; a local
        parent is waited for `parent_wait_s` by an agent turn (`agent`), else until the
        maximum age (inf)."""
        if not boundary.parent_span_id:
            return -math.inf
        remote = boundary.parent_is_remote
        if remote:
            return -math.inf
        since = held.arrived[boundary.span_id]
        if remote is None:
            return since + self.quiet_window_s
        return since + self.parent_wait_s if agent else math.inf

    def _held_back(self, key: TraceKey, held: _Held, shape: TurnShape) -> bool:
        """Whether another held trace of the turn's conversation has a span not yet
        graded that started before the turn (its earlier turn goes first); the trace then
        waits to be woken when that trace grades or leaves. Two traces never wait for each
        other: a trace waits only for one whose earliest open span (an enclosing server
        span counts) started before its own, ties going by trace key, so two requests of
        one conversation that overlap in time are graded in the order they started."""
        conversation = held.conversation
        if not conversation:
            return False
        start = shape.top.start_ns
        mine = (held.open_start, key)
        ckey = (key[0], conversation)
        for other in self._conversations.get(ckey, ()):
            theirs = self._held[other].open_start
            if other != key and theirs < start and (theirs, other) < mine:
                self._waiting.setdefault(ckey, set()).add(key)
                self.stats.held_back += 1
                return True
        return False

    def _grade(self, key: TraceKey, held: _Held, shape: TurnShape, reason: DueReason) -> DueTurn:
        """Hand out one turn of trace `key`."""
        top_id = shape.top.span_id
        again = top_id in held.graded
        held.graded[top_id] = _size(shape, held)
        if held.records:
            for span in (*shape.spans, *shape.context):
                records = held.records.get(span.span_id)
                if records:
                    join_records(span, records)
        self.stats.turns_due += 1
        self.stats.early_evaluations += reason != "quiet"
        self.stats.re_evaluations += again
        # a trace re-opened by a late record alone holds no span offset; its records share
        # the partition of its spans (the topics are co-partitioned)
        partition = min(held.offsets or held.record_offsets, default=-1)
        return DueTurn(shape.trace(), reason, again, partition)

    def _after_grading(
        self, key: TraceKey, held: _Held, layout: TurnLayout, graded: list[DueTurn]
    ) -> None:
        """Update what waits on the trace's conversation once it graded turns: its earliest
        span not graded as it is, and a wake-up for the turns held back behind it."""
        if not graded:
            return
        starts = [
            span.start_ns
            for shape in layout.turns
            if held.graded.get(shape.top.span_id) != _size(shape, held)
            for span in shape.spans
        ]
        starts += [span.start_ns for _, spans in layout.loose.values() for span in spans]
        held.open_start = min(starts, default=math.inf)
        self._wake_waiting(key, held)

    def _wake_waiting(self, key: TraceKey, held: _Held) -> None:
        """Wake (now) the traces whose turns wait behind trace `key`'s conversation."""
        if not held.conversation:
            return
        for waiting in self._waiting.pop((key[0], held.conversation), ()):
            if waiting != key and waiting in self._held:
                heapq.heappush(self._wakes, (-math.inf, waiting))

    def _close(self, key: TraceKey) -> None:
        """The trace leaves the buffer for the recently graded ones, kept for late spans
        by their sources (the oldest forgotten beyond `recent_traces` or `recent_spans`)."""
        held = self._held.pop(key)
        self._span_count -= len(held.spans)
        self._record_count -= sum(map(len, held.records.values()))
        held.spans, held.open_start, held.layout = [], math.inf, None
        if held.conversation:
            self._leave_conversation(key, held.conversation)
            self._wake_waiting(key, held)
        self._recent[key] = held
        self._recent_size += held.size
        while len(self._recent) > self.recent_traces or self._recent_size > self.recent_spans:
            self._recent_size -= self._recent.popitem(last=False)[1].size

    def _leave_conversation(self, key: TraceKey, conversation: str) -> None:
        """Trace `key` is no longer held: its conversation no longer waits for it."""
        ckey = (key[0], conversation)
        traces = self._conversations.get(ckey)
        if traces is not None:
            traces.discard(key)
            if not traces:
                del self._conversations[ckey]

    def forget_partitions(self, partitions: set[int]) -> int:
        """Drop every trace held for `partitions` of either topic (co-partitioned: moved
        to another consumer together, which re-reads them from the committed offsets);
        returns how many were dropped."""
        keys = [
            k for k, h in self._held.items()
            if partitions & h.offsets.keys() or partitions & h.record_offsets.keys()
        ]  # fmt: skip
        for key in keys:
            held = self._held.pop(key)
            self._span_count -= len(held.spans)
            self._record_count -= sum(map(len, held.records.values()))
            if held.conversation:
                self._leave_conversation(key, held.conversation)
        self._spans.forget(partitions)
        self._records.forget(partitions)
        return len(keys)

    def committable(self) -> dict[int, int]:
        """Per partition of the spans' topic, the next offset to commit: the lowest offset
        still held, else one past the last offset read."""
        return self._spans.committable()

    def committable_records(self) -> dict[int, int]:
        """`committable` of the records' topic."""
        return self._records.committable()


def _size(shape: TurnShape, held: _Held) -> tuple[int, int]:
    """What a turn was graded as: its spans (and context), and the records tied to them."""
    records = held.records
    if not records:
        return shape.size, 0
    tied = sum(len(records.get(s.span_id, ())) for s in (*shape.spans, *shape.context))
    return shape.size, tied


def _record_identity(record: LogRecord) -> tuple[object, ...]:
    """What tells a record from another of its span (a re-read one is the same)."""
    return (
        record.span_id, record.time_ns, record.observed_ns, record.event_name,
        tuple(sorted((k, repr(v)) for k, v in record.attributes.items())),
    )  # fmt: skip


class _Offsets:
    """The offsets of one topic's partitions: the next after the last read, and per
    partition a heap of the lowest offset each held trace holds (`offsets_of` a trace's
    buffer: partition -> its lowest), stale entries skipped lazily and compacted when
    mostly stale."""

    def __init__(
        self, held: dict[TraceKey, _Held], offsets_of: Callable[[_Held], dict[int, int]]
    ) -> None:
        self._held = held
        self._offsets_of = offsets_of
        self._next: dict[int, int] = {}
        self._heaps: dict[int, list[tuple[int, TraceKey]]] = {}  # partition -> heap

    def read(self, partition: int, offset: int) -> None:
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def hold(self, key: TraceKey, held: _Held, partition: int, offset: int) -> None:
        """Trace `key` holds `offset` of `partition` (when lower than what it held)."""
        offsets = self._offsets_of(held)
        if offset < offsets.get(partition, offset + 1):
            offsets[partition] = offset
            heapq.heappush(self._heaps.setdefault(partition, []), (offset, key))

    def forget(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._next.pop(partition, None)
            self._heaps.pop(partition, None)

    def committable(self) -> dict[int, int]:
        out = dict(self._next)
        if sum(map(len, self._heaps.values())) > 4 * len(self._held) + 1024:
            self._compact()
        for partition, heap in self._heaps.items():
            while heap and not self._holds(heap[0][1], partition, heap[0][0]):
                heapq.heappop(heap)
            if heap:
                out[partition] = heap[0][0]
        return out

    def _compact(self) -> None:
        """Rebuild the heaps from the traces still held."""
        self._heaps = {partition: [] for partition in self._heaps}
        for key, held in self._held.items():
            for partition, offset in self._offsets_of(held).items():
                self._heaps.setdefault(partition, []).append((offset, key))
        for heap in self._heaps.values():
            heapq.heapify(heap)

    def _holds(self, key: TraceKey, partition: int, offset: int) -> bool:
        held = self._held.get(key)
        return held is not None and self._offsets_of(held).get(partition) == offset
