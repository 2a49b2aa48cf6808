"""What the embedded stack's parent and children say to each other over their queues: one
small dataclass per command (parent -> child) and per event (child -> parent).

Every child understands `Stop` and `Stats`; the collector also `Hold`, `Resume` and
`OldBrokerRead`, a realtime process `Prepare` and `HandOver`. A child
reports `Ready` once it serves (the collector `CollectorReady` with its ports) and
`Failed` when it fails; each command that wants an answer has its own reply type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Command:
    """A message from the parent to a child."""


class Event:
    """A message from a child to the parent."""


@dataclass(frozen=True)
class ReadUpTo(Command):
    """A command that first reads up to `targets` (partition -> next offset; what the
    collector produced) and, with `release_held`, evaluates every trace still held."""

    targets: dict[int, int] | None = None
    release_held: bool = False


@dataclass(frozen=True)
class Stop(ReadUpTo):
    """Stop for good, answering a `Stopped` (a realtime process reads up to the targets
    first: `RealtimePlane.stop`; the collector ignores them)."""


@dataclass(frozen=True)
class Stats(Command):
    """Report your counters now (answered by `Counted`)."""


@dataclass(frozen=True)
class Hold(Command):
    """Collector: divert sends to the spill once those under way settled (answered by
    `Held`, `KafkaPublisher.hold`)."""


@dataclass(frozen=True)
class Resume(Command):
    """Collector: send to Kafka again, through a new producer when `broker_replaced` (to
    `bootstrap` when it moved; `broker_lost`: the old broker died, so the log is sent again
    from where its readers committed; `old_read_later`: the old broker's readers are still
    reading it, so the log keeps what went there until `OldBrokerRead`:
    `Collector.broker_replaced`)."""

    broker_replaced: bool = False
    bootstrap: str | None = None
    broker_lost: bool = False
    old_read_later: bool = False


@dataclass(frozen=True)
class OldBrokerRead(Command):
    """Collector: the readers of the broker it sent to before `Resume(old_read_later)` read
    it to its end, so the durable log lets go of what went there."""


@dataclass(frozen=True)
class Prepare(Command):
    """Realtime: join the consumer group on the fresh broker at `bootstrap` beside the
    current consumer, reading nothing yet (`RealtimePlane.prepare`; answered by
    `Prepared`)."""

    bootstrap: str


@dataclass(frozen=True)
class HandOver(Command):
    """Realtime: read the current broker up to `targets` (partition -> next offset),
    evaluate every trace held (its data is about to end), store, commit and close its
    Kafka clients, then poll on with the consumer `Prepare` joined
    (`RealtimePlane.hand_over`; answered by `Suspended`)."""

    targets: dict[int, int] | None = None


@dataclass(frozen=True)
class Ready(Event):
    """The child serves."""


@dataclass(frozen=True)
class CollectorReady(Ready):
    """The collector serves on these ports."""

    grpc_port: int
    http_port: int


@dataclass(frozen=True)
class Failed(Event):
    """The child failed (then exits); `reason` says why, in one line."""

    reason: str


@dataclass(frozen=True)
class Counted(Event):
    """A child's counters (answers `Stats`)."""

    counters: dict[str, Any]


@dataclass(frozen=True)
class Held(Event):
    """The collector holds its sends (of spans and records); `offsets` of spans it
    produced so far (partition -> next offset), None when sends did not settle (answers
    `Hold`). The readers read on past them until the topics are quiet, which takes in the
    records sent before the hold."""

    offsets: dict[int, int] | None


@dataclass(frozen=True)
class Suspended(Event):
    """A realtime process left the broker it read (`HandOver`); the partitions of the
    targets it reached there."""

    reached: set[int]


@dataclass(frozen=True)
class Prepared(Event):
    """A realtime process's consumer on the fresh broker has partitions (`joined`), or
    did not get them in time (it is handed over all the same)."""

    joined: bool


@dataclass(frozen=True)
class Stopped(Event):
    """The child stopped; its final `counters` (answers `Stop`)."""

    counters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectorStopped(Stopped):
    """The collector stopped; `produced`: the offsets it produced (partition -> next);
    `sent`: the log offset up to which its spill was sent to Kafka."""

    produced: dict[int, int] = field(default_factory=dict)
    sent: int | None = None
    logs_sent: int | None = None  # the same of the log records' spill


@dataclass(frozen=True)
class RealtimeStopped(Stopped):
    """A realtime process stopped; the partitions of the targets it read up to."""

    reached: set[int] = field(default_factory=set)
