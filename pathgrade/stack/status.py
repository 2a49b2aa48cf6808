"""What the embedded stack's processes have done, as one snapshot, and how to show it.

`pathgrade up` takes a snapshot every `--status-every` seconds (`Stack.snapshot`): the
collector's, every realtime process's and the store writer's counters since each
started, and the bundled broker's resident memory. It prints `status_line` when traffic
moved since the last snapshot and serves the latest at the store owner's loopback
`/status`, which `pathgrade status` prints (`status_report`). A process that did not
answer in time shows as null in the snapshot and "not answering" in the line. What a
writer is stalled on (`schemas.stalls`) ends the line, `stalled: what (why)`, while it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from pathgrade.realtime_plane.coverage import DETECTOR_ERRORS, consumers_coverage
from pathgrade.realtime_plane.delays import P99
from pathgrade.schemas.decline import DECLINES
from pathgrade.stack.metrics import Sample, labelled_samples
from pathgrade.web.health import stalls_in

Snapshot = dict[str, Any]
_MB = 1024 * 1024


def snapshot_of(
    collector: dict[str, Any] | None,
    store_writer: dict[str, Any],
    realtime: list[dict[str, Any] | None],
    broker_rss_bytes: int | None,
    restarts: Mapping[str, int] | None = None,
    exporter: dict[str, Any] | None = None,
) -> Snapshot:
    """A snapshot taken now: each process's counters (None: it did not answer), the
    bundled broker's memory (None: no bundled broker, or it has stopped), how often
    supervision restarted each process (the broker: replaced after it died) and the
    results exporter's counters (only with `--export-otlp`)."""
    snapshot: Snapshot = {
        "taken_at": time.time(),
        "collector": collector,
        "store_writer": store_writer,
        "realtime": realtime,
        "broker_rss_bytes": broker_rss_bytes,
        "restarts": dict(restarts or {}),
    }
    if exporter is not None:
        snapshot["exporter"] = exporter
    return snapshot


def _rate(current: dict[str, Any] | None, previous: dict[str, Any] | None, key: str,
          seconds: float) -> str:  # fmt: skip
    """ ", 1,234/s" from two counter sets; "" without a comparable earlier value (a first
    snapshot, or a process restarted in between)."""
    if not current or not previous or seconds <= 0:
        return ""
    delta = current.get(key, 0) - previous.get(key, 0)
    return f" ({delta / seconds:,.0f}/s)" if delta >= 0 else ""


def summed(counters: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Counter sets added key by key, and their entries of ints by reason (`DECLINES`)
    added reason by reason (other values that are not ints are left out)."""
    totals: dict[str, Any] = {}
    for counts in counters:
        for key, value in counts.items():
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
        by_reason = counts.get(DECLINES)
        if by_reason:
            total = totals.setdefault(DECLINES, {})
            for reason, count in by_reason.items():
                total[reason] = total.get(reason, 0) + count
    return totals


def plus_earlier(
    counters: dict[str, Any] | None, earlier: Mapping[str, int]
) -> dict[str, Any] | None:
    """A restarted process's `counters` with `earlier` (what the processes it replaced
    counted, key by key) added; None (not answering) stays None."""
    if counters is None or not earlier:
        return counters
    return {**counters, **{key: counters.get(key, 0) + n for key, n in earlier.items()}}


def _realtime_totals(workers: list[dict[str, Any] | None]) -> dict[str, int] | None:
    """The realtime processes' counters summed; None when none answered."""
    answered = [w for w in workers if w is not None]
    return summed(answered) if answered else None


def _collector_part(now: Snapshot, before: Snapshot | None, seconds: float) -> str:
    c = now.get("collector")
    if c is None:
        return "collector not answering"
    part = f"in {c['accepted_spans']:,} spans" + _rate(
        c, before and before.get("collector"), "accepted_spans", seconds
    )
    if c["rejected_spans"]:
        part += f", {c['rejected_spans']:,} rejected"
    if c.get("spill_bytes"):
        part += f", spill {c['spill_bytes'] / _MB:,.1f} MB"
    if c.get("dead_letter_messages"):
        part += f", {c['dead_letter_messages']:,} dead-lettered (pathgrade dead-letter)"
    return part


def _store_part(now: Snapshot, before: Snapshot | None, seconds: float) -> str:
    w = now["store_writer"]
    part = f"stored {w['spans']:,}" + _rate(w, before and before["store_writer"], "spans", seconds)
    if w["rejected_spans"]:
        part += f", {w['rejected_spans']:,} not storable"
    if w.get("partly_decoded_spans"):
        part += f", {w['partly_decoded_spans']:,} partly decoded"
    if w.get("python_path_messages"):
        part += f", {w['python_path_messages']:,} messages decoded in Python (outside the SQL)"
    return part


def _realtime_part(now: Snapshot, before: Snapshot | None, seconds: float) -> str:
    workers = now.get("realtime", [])
    totals = _realtime_totals(workers)
    if totals is None:
        return "realtime not answering"
    earlier = _realtime_totals(before.get("realtime", [])) if before else None
    part = (
        f"evaluated {totals.get('traces_evaluated', 0):,} traces"
        + _rate(totals, earlier, "traces_evaluated", seconds)
        + f", {totals.get('alerts', 0):,} alerts, {totals.get('traces_held', 0):,} held"
    )
    delays = [w[P99] for w in workers if w is not None and P99 in w]
    if delays:
        part += f", p99 delay {max(delays):.1f} s"
    gaps = coverage_of(now)
    if gaps:
        part += f", {len(gaps)} coverage gap{'s' if len(gaps) > 1 else ''}"
    silent = sum(w is None for w in workers)
    if silent:
        part += f" ({silent} of {len(workers)} realtime processes not answering)"
    if totals.get("webhook_failed") or totals.get("webhook_dropped"):
        part += (
            f", webhook {totals.get('webhook_failed', 0):,} failed "
            f"{totals.get('webhook_dropped', 0):,} dropped"
        )
    return part


def _moved(now: Snapshot, before: Snapshot | None) -> bool:
    """Anything counted since `before` (always, for a first snapshot)."""
    return before is None or _counts(now) != _counts(before)


def _counts(snapshot: Snapshot) -> dict[str, Any]:
    """The parts of a snapshot that change with traffic (not its time or memory)."""
    return {k: v for k, v in snapshot.items() if k not in ("taken_at", "broker_rss_bytes")}


def status_line(now: Snapshot, before: Snapshot | None = None, label: str = "status") -> str | None:
    """`label: ` and what the stack did (rates over the time since `before`); None when
    nothing moved since `before`."""
    if not _moved(now, before):
        return None
    seconds = now["taken_at"] - before["taken_at"] if before else 0.0
    parts = [
        _collector_part(now, before, seconds),
        _store_part(now, before, seconds),
        _realtime_part(now, before, seconds),
    ]
    if now.get("exporter") is not None:
        parts.append(_exporter_part(now["exporter"]))
    if now.get("broker_rss_bytes") is not None:
        parts.append(f"broker {now['broker_rss_bytes'] / _MB:,.0f} MB")
    restarts = sorted((now.get("restarts") or {}).items())
    if restarts:
        parts.append("restarted " + ", ".join(f"{name} {n}x" for name, n in restarts))
    stalls = stalls_in(now)
    if stalls:
        parts.append("stalled: " + "; ".join(stalls))
    forged = _forged_part(now)
    if forged:
        parts.append(forged)
    return f"{label}: " + " | ".join(parts)


def _forged_part(now: Snapshot) -> str:
    """The messages each consumer refused as not the stack's (no or a wrong MAC): "" for
    none (each consumer group reads, and refuses, the same forged span message)."""
    store = now["store_writer"].get("forged_messages", 0)
    realtime = (_realtime_totals(now.get("realtime", [])) or {}).get("forged_messages", 0)
    if not store and not realtime:
        return ""
    return f"forged messages refused: store writer {store:,}, realtime {realtime:,}"


def _exporter_part(exporter: dict[str, Any]) -> str:
    part = (
        f"exported {exporter['exported_scores']:,} scores, {exporter['exported_alerts']:,} alerts"
    )
    if exporter["refused"]:
        part += f", {exporter['refused']:,} given up"
    if exporter["failing"]:
        part += f", failing: {exporter['latest_error']} (retrying; nothing is dropped)"
    return part


def status_report(document: dict[str, Any], now: float | None = None) -> str:
    """`pathgrade status` text: the stack's latest line and how old it is (at `now`, Unix
    seconds), then every process's counters."""
    snapshot = document["snapshot"]
    age = (time.time() if now is None else now) - snapshot["taken_at"]
    line = document.get("line") or status_line(snapshot) or ""
    lines = [f"{line} ({_age(age)})"]
    processes = [
        ("collector", snapshot.get("collector")),
        ("store writer", snapshot["store_writer"]),
    ]
    processes += [
        (f"realtime-{n}", counters) for n, counters in enumerate(snapshot.get("realtime", []), 1)
    ]
    if "exporter" in snapshot:
        processes.append(("exporter", snapshot["exporter"]))
    for name, counters in processes:
        shown = (
            "not answering" if counters is None
            else " ".join(f"{k}={v}" for k, v in sorted(counters.items()) if _scalar(v))
        )  # fmt: skip
        lines.append(f"  {name:<13} {shown}")
    errors = _detector_errors(snapshot.get("realtime", []))
    if errors:
        lines.append("  detector errors " + ", ".join(f"{c}: {n}" for c, n in errors.items()))
    gaps = coverage_of(snapshot)
    if gaps:
        lines.append("coverage gaps (share of a service's traces each detector decided):")
        lines += [
            f"  {g['code']} {g['name']} on {g['service'] or '(unnamed)'}"
            + (f" (tenant {g['tenant']})" if g["tenant"] != "default" else "")
            + f": {g['coverage']:.0%} of {g['traces']:,} traces; missing {g['missing']}; "
            f"to close: {g['close']}"
            for g in gaps
        ]
    return "\n".join(lines)


def _age(seconds: float) -> str:
    """How long ago a snapshot was taken, in words: "taken 4 s ago", "taken 2 min 5 s ago"."""
    whole = max(0, round(seconds))
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"taken {hours} h {minutes} min ago"
    return f"taken {minutes} min {secs} s ago" if minutes else f"taken {secs} s ago"


def _scalar(value: Any) -> bool:
    return not isinstance(value, list | dict)


def coverage_of(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The coverage gaps of the realtime processes together (`coverage_rows`)."""
    return consumers_coverage(snapshot.get("realtime", []))


def _detector_errors(workers: list[dict[str, Any] | None]) -> dict[str, int]:
    return summed((w or {}).get(DETECTOR_ERRORS, {}) for w in workers)


def snapshot_samples(snapshot: Snapshot) -> list[Sample]:
    """A snapshot as metric samples (`pathgrade.stack.metrics`): realtime processes labelled
    `worker`, the bundled broker's memory as `pathgrade_broker_rss_bytes`."""
    samples = labelled_samples("store_writer", {}, snapshot["store_writer"])
    if snapshot.get("collector") is not None:
        samples += labelled_samples("collector", {}, snapshot["collector"])
    for n, counters in enumerate(snapshot.get("realtime", []), 1):
        if counters is not None:
            samples += labelled_samples("realtime", {"worker": str(n)}, counters)
    if snapshot.get("exporter") is not None:
        samples.append(("exporter", {}, snapshot["exporter"]))
    if snapshot.get("broker_rss_bytes") is not None:
        samples.append(("broker", {}, {"rss_bytes": snapshot["broker_rss_bytes"]}))
    for name, count in (snapshot.get("restarts") or {}).items():
        samples.append(("stack", {"process": name}, {"restarts": count}))
    return samples
