"""The realtime plane's counters, plain dataclasses: what a realtime process read,
evaluated and alerted on (`RealtimeCounters`) and what its turn assembler held
(`AssemblerStats`). Apart from the plane so that the stack shares them across processes
(`pathgrade.stack.children.SharedCounters`) without importing the plane and its detectors."""

from __future__ import annotations

from dataclasses import dataclass

MONITOR_TURNS = "monitor_turns"
"""The counters' entry (`RealtimePlane.counters`) holding the monitors' totals:
(tenant, service, agent, counter) -> turns."""


@dataclass
class RealtimeCounters:
    """What one realtime process read, evaluated, alerted on and committed."""

    messages: int = 0
    spans: int = 0
    undecodable_messages: int = 0
    partly_decoded_spans: int = 0  # evaluated without their GenAI fields (content.otlp)
    unreadable_headers: int = 0  # messages read with a default tenant or receive time
    traces_evaluated: int = 0  # turns evaluated (a trace holds one or more; the metric's name)
    alerts: int = 0
    sampled: int = 0
    commits: int = 0
    store_failures: int = 0
    evaluation_failures: int = 0  # turns whose evaluation raised (logged, then skipped)
    turns_shared: int = 0  # conversation turns published for the group's other consumers
    turns_received: int = 0  # turns other consumers published
    forged_messages: int = 0  # refused (spans, turns): no or a wrong MAC under the stack's key
    log_records: int = 0  # read from the logs topic (joined to their spans' turns)


@dataclass
class AssemblerStats:
    """What a turn assembler added, handed out, graded again and left out."""

    spans_added: int = 0
    turns_due: int = 0
    early_evaluations: int = 0  # max age, memory bound or drain
    re_evaluations: int = 0
    duplicate_spans: int = 0  # read again (same trace and span id): left out
    records_added: int = 0  # log records tied to a span
    duplicate_records: int = 0  # read again: left out
    held_back: int = 0  # times a due turn waited for an earlier turn of its conversation
