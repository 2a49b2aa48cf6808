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
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from starlette.responses import Response

from pathgrade.collector.http_server import ConnectionLimits, UvicornServer
from pathgrade.realtime_plane.counters import MONITOR_TURNS
from pathgrade.realtime_plane.coverage import COVERAGE, DETECTOR_ERRORS, coverage_rows
from pathgrade.schemas.decline import DECLINES
from pathgrade.schemas.stalls import STALLED
from pathgrade.web.metric_names import CONTENT_TYPE, GAUGES, Sample, metric_name

log = logging.getLogger(__name__)

LIMITS = ConnectionLimits(idle_timeout_s=60.0, read_timeout_s=10.0, max_connections=64)
"""`/metrics` connections: closed after 60 s without a request, a request head whole
within 10 s, at most 64 open (the longest-idle one closed to admit another)."""
GRACE_S = 2.0
"""At stop, scrapes being answered finish within this."""
_TEXT = "text/plain; charset=utf-8"


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
    code, the store writer's SQL insert's declines by reason (`declined_messages`), its
    turns by monitor counter (`monitor_turns` by tenant, service, agent and counter:
    what the generated objective rules read) and what it is stalled on (`stalled` 1 by
    `what`)."""
    samples: list[Sample] = [(process, labels, counters)]
    for what in counters.get(STALLED) or {}:
        samples.append((process, {**labels, "what": what}, {STALLED: 1}))
    for row in coverage_rows([counters.get(COVERAGE)]):
        where = {**labels, "tenant": row["tenant"], "service": row["service"], "code": row["code"]}
        figures = {"coverage_ratio": row["coverage"], "coverage_undecided_traces": row["undecided"]}
        samples.append((process, where, figures))
    for code, count in counters.get(DETECTOR_ERRORS, {}).items():
        samples.append((process, {**labels, "code": code}, {"detector_errors": count}))
    for reason, count in (counters.get(DECLINES) or {}).items():
        samples.append((process, {**labels, "reason": reason}, {"declined_messages": count}))
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


class MetricsServer(UvicornServer):
    """Serves `GET /metrics` from `collect()` (called per scrape, on the event loop: it must
    not block) on
    `host:port`, on uvicorn through the OTLP/HTTP receiver's connections
    (`collector.http_server`; LIMITS here)."""

    def __init__(self, host: str, port: int, collect: Callable[[], str]) -> None:
        super().__init__((host, port), _MetricsApp(collect), LIMITS, GRACE_S)

    def start(self, name: str = "metrics") -> None:
        """Serve in a daemon thread."""
        super().start(name)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _MetricsApp:
    """The ASGI application: `GET /metrics`, and a refusal for anything else."""

    def __init__(self, collect: Callable[[], str]) -> None:
        self.collect = collect

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        answer = await self._answer(scope["method"], scope["path"])
        await answer(scope, receive, send)

    async def _answer(self, method: str, path: str) -> Response:
        if method != "GET":
            return Response(f"Unsupported method ({method!r})\n", 501, media_type=_TEXT)
        if path != "/metrics":
            return Response(b"only /metrics here\n", 404, media_type=_TEXT)
        try:
            body = self.collect()
        except Exception:
            log.exception("collecting metrics failed")
            return Response(b"collecting metrics failed; see the log\n", 500, media_type=_TEXT)
        return Response(body.encode(), 200, media_type=CONTENT_TYPE)


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
