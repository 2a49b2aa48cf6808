"""Prometheus metrics of pathgrade's processes: the counters behind `pathgrade status`, in
the Prometheus text exposition format (version 0.0.4), served at `/metrics`.

Production boxes serve them with `--metrics-listen HOST:PORT` (`pathgrade collector`,
`store-writer`, `realtime`); `pathgrade up` serves its latest status snapshot at the
store owner's loopback `/metrics`. Every value is `pathgrade_<process>_<counter>`:
cumulative counts since the process started get `_total` and type counter; levels
(traces held, spill bytes, dead-lettered messages, broker memory, the realtime plane's
recent detection delays) are gauges. A writer stalled on a resource (`schemas.stalls`)
shows as `pathgrade_<process>_stalled{what="..."} 1` while it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import ThreadingHTTPServer
from typing import Any

from pathgrade.realtime_plane.coverage import COVERAGE, DETECTOR_ERRORS, coverage_rows
from pathgrade.realtime_plane.rollups import MONITOR_TURNS
from pathgrade.schemas.stalls import STALLED
from pathgrade.stack.http_handler import QuietHandler
from pathgrade.web.metric_names import CONTENT_TYPE, GAUGES, Sample, metric_name

log = logging.getLogger(__name__)


def _metric(process: str, counter: str) -> tuple[str, str]:
    """The metric's name and its HELP and TYPE lines."""
    gauge = counter in GAUGES
    name = metric_name(process, counter)
    help_text = f"{counter.replace('_', ' ')} of the pathgrade {process.replace('_', ' ')}"
    kind = "gauge" if gauge else "counter"
    return name, f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"


def _labels(labels: Mapping[str, str]) -> str:
    """`{key="value",...}` with the format's escapes, or "" without labels."""
    if not labels:
        return ""
    escaped = (
        key + '="' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        for key, value in sorted(labels.items())
    )
    return "{" + ",".join(escaped) + "}"


def labelled_samples(
    process: str, labels: Mapping[str, str], counters: Mapping[str, Any]
) -> list[Sample]:
    """One process's counters as samples: its numbers, and its structured entries as
    labelled series: the realtime plane's coverage rows (`coverage_ratio`,
    `coverage_undecided_traces` by tenant, service and code), its detector errors by
    code, its turns by monitor counter (`monitor_turns` by tenant, service, agent and
    counter: what the generated objective rules read) and what it is stalled on
    (`stalled` 1 by `what`)."""
    samples: list[Sample] = [(process, labels, counters)]
    for what in counters.get(STALLED) or {}:
        samples.append((process, {**labels, "what": what}, {STALLED: 1}))
    for row in coverage_rows([counters.get(COVERAGE)]):
        where = {**labels, "tenant": row["tenant"], "service": row["service"], "code": row["code"]}
        figures = {"coverage_ratio": row["coverage"], "coverage_undecided_traces": row["undecided"]}
        samples.append((process, where, figures))
    for code, count in counters.get(DETECTOR_ERRORS, {}).items():
        samples.append((process, {**labels, "code": code}, {"detector_errors": count}))
    for row in counters.get(MONITOR_TURNS) or ():
        where = {**labels, **{k: row[k] for k in ("tenant", "service", "agent", "counter")}}
        samples.append((process, where, {MONITOR_TURNS: row["turns"]}))
    return samples


def prometheus_text(samples: Iterable[Sample]) -> str:
    """`samples` in the text exposition format: one family per metric name (HELP, TYPE,
    then a line per label set)."""
    families: dict[str, tuple[str, list[str]]] = {}
    for process, labels, counters in samples:
        for counter, value in sorted(counters.items()):
            if isinstance(value, int | float) and not isinstance(value, bool):
                name, header = _metric(process, counter)
                families.setdefault(name, (header, []))[1].append(
                    f"{name}{_labels(labels)} {value}\n"
                )
    return "".join(header + "".join(lines) for header, lines in families.values())


class MetricsServer(ThreadingHTTPServer):
    """Serves `GET /metrics` from `collect()` (called per scrape) on `host:port`."""

    daemon_threads = True

    def __init__(self, host: str, port: int, collect: Callable[[], str]) -> None:
        self.collect = collect
        super().__init__((host, port), _MetricsHandler)

    def start(self) -> None:
        """Serve in a daemon thread."""
        threading.Thread(target=self.serve_forever, name="metrics", daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _MetricsHandler(QuietHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._reply(404, b"only /metrics here\n", "text/plain; charset=utf-8")
            return
        try:
            body = self.server.collect().encode()
        except Exception:
            log.exception("collecting metrics failed")
            self._reply(500, b"collecting metrics failed; see the log\n", "text/plain")
            return
        self._reply(200, body, CONTENT_TYPE)


def serve_metrics(
    listen: tuple[str, int], process: str, counters: Callable[[], Mapping[str, Any]]
) -> MetricsServer:
    """Serve `counters()` as `process`'s metrics at `listen` (`parse_listen`) until
    `stop()`. Raises OSError naming the address when it cannot listen there."""
    host, port = listen
    try:
        server = MetricsServer(
            host, port, lambda: prometheus_text(labelled_samples(process, {}, counters()))
        )
    except OSError as exc:
        raise OSError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    server.start()
    return server


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` to listen on (`--metrics-listen`, `--listen`); ValueError naming what is
    wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65_535:
        raise ValueError(f"{text!r}: expected HOST:PORT, e.g. 0.0.0.0:9464")
    return host.strip("[]"), int(port)
