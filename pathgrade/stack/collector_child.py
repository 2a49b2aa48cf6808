"""The embedded stack's collector child process: its entry point, apart from the stack's
own module so that the spawned interpreter imports only what the collector needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pathgrade.collector.config import CollectorConfig
from pathgrade.collector.counters import IngestCounters
from pathgrade.stack.children import SharedCounters, child_process
from pathgrade.stack.messages import (
    CollectorReady,
    CollectorStopped,
    Command,
    Counted,
    Event,
    Held,
    Hold,
    OldBrokerRead,
    Resume,
    Stats,
    Stop,
)

if TYPE_CHECKING:
    from multiprocessing.queues import Queue


def collector_main(
    config: dict[str, Any],
    counters: SharedCounters[IngestCounters],
    events: Queue[Event],
    commands: Queue[Command],
) -> None:
    """Child process: run the collector (counting into `counters`, which the parent
    reads); `Hold`/`Resume` divert it to its spill and back (answering `Held` with the
    offsets produced so far; resuming on a replaced broker with a new producer, keeping
    what went to the old one in the log until `OldBrokerRead`); `Stop`
    reports them last (`CollectorStopped`, with the log offset up to which its spill was
    sent to Kafka)."""
    # imported here: the stack's own process imports this module only to name the entry point
    from pathgrade.collector.service import Collector

    with child_process("collector", events):
        collector = Collector(CollectorConfig.model_validate(config), counters.counters())
        collector.start()
        publisher = collector.publisher
        assert publisher is not None
        events.put(CollectorReady(collector.grpc_port, collector.http_port))
        while not isinstance(command := commands.get(), Stop):
            if isinstance(command, Stats):
                events.put(Counted(collector.counters()))
            elif isinstance(command, Hold):  # the records' sends too: nothing new comes
                settled = [p.hold() for p in collector.publishers()]
                events.put(Held(None if None in settled else settled[0]))
            elif isinstance(command, Resume) and command.broker_replaced:
                bootstrap = command.bootstrap or collector.config.kafka_bootstrap
                collector.broker_replaced(bootstrap, command.broker_lost, command.old_read_later)
            elif isinstance(command, OldBrokerRead):
                for each in collector.publishers():
                    each.old_broker_read()
            elif isinstance(command, Resume):
                for held in collector.publishers():
                    held.resume()
        collector.stop()
        sent = [p.spill.read_position for p in collector.publishers()]
        events.put(CollectorStopped(collector.counters(), publisher.produced_offsets(), *sent))
