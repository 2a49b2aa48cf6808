"""A read-only browser view of the running stack, served by the store owner on loopback.

`/` lists the latest alerts (refreshing every few seconds) with the stack's counts;
`/trace/<trace id>` shows one trace as a span tree with its GenAI columns, its alerts and
its scores, so an alert leads to the path that raised it. Pages are rendered on the
server from the same store every command reads; every value is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

from pathgrade.batch_plane.store.client import Store

TRACE_ID = re.compile(r"[0-9a-f]{32}")
ALERTS_SHOWN = 200
REFRESH_S = 5

_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5rem;color:#1d2330}
h1{font-size:1.3rem}h2{font-size:1.05rem;margin-top:1.6rem}
table{border-collapse:collapse;width:100%}td,th{padding:.3rem .5rem;text-align:left;
border-bottom:1px solid #e3e6ec;vertical-align:top}th{background:#f4f6f9}
.high,.critical{color:#b3261e;font-weight:600}.medium{color:#9a6700}.low{color:#3c6e3c}
.muted{color:#6b7280}code{font-size:12px}.counts span{margin-right:1.5rem}
"""


def overview_page(store: Store, status: str | None = None) -> str:
    """The latest alerts, newest first, how much the store holds and, from a running
    `pathgrade up`, its latest status line."""
    spans, traces = store.query("SELECT count(), uniqExact(Tenant, TraceId) FROM spans").rows[0]
    (alerts,) = store.query("SELECT count() FROM alerts FINAL").rows[0]
    rows = store.query(
        "SELECT DetectedAt, Code, Name, Severity, Kind, Reason, Service, Agent, TraceId, "
        "Incomplete FROM alerts FINAL ORDER BY DetectedAtNs DESC LIMIT {n:UInt32}",
        {"n": ALERTS_SHOWN},
    ).rows
    table = _table(
        ("detected", "code", "severity", "reason", "service / agent", "trace"),
        (
            (
                _text(detected),
                f"<b>{_text(code)}</b> <span class=muted>{_text(name)}</span>",
                f"<span class={_text(severity)}>{_text(severity)}</span>"
                + (" <span class=muted>(cannot decide)</span>" if kind != "violation" else ""),
                _text(reason) + (" <span class=muted>(incomplete)</span>" if incomplete else ""),
                f"{_text(service)} / {_text(agent)}",
                _trace_link(trace_id),
            )
            for detected, code, name, severity, kind, reason, service, agent, trace_id, incomplete
            in rows
        ),
    )  # fmt: skip
    counts = (
        f"<p class=counts><span>{spans:,} spans</span><span>{traces:,} traces</span>"
        f"<span>{alerts:,} alerts</span></p>"
    )
    if status:
        counts += f"<p class=muted>{_text(status)}</p>"
    shown = f"<h2>Latest alerts ({len(rows)} of {alerts:,})</h2>"
    return _page("pathgrade", counts + shown + table, refresh_s=REFRESH_S)


def trace_page(store: Store, trace_id: str) -> str | None:
    """One trace: its span tree, alerts and scores; None when no span of it is stored."""
    spans = store.query(
        "SELECT SpanId, ParentSpanId, SpanName, GenAIOperation, GenAIAgentName, "
        "GenAIToolName, GenAIToolArguments, StatusCode, GenAIErrorType, Duration, "
        "ServiceName, Tenant, GenAIConversationId FROM spans FINAL "
        "WHERE TraceId = {trace:String} ORDER BY Timestamp, SpanId",
        {"trace": trace_id},
    ).rows
    if not spans:
        return None
    alerts = store.query(
        "SELECT Code, Severity, Reason, SpanId FROM alerts FINAL "
        "WHERE TraceId = {trace:String} ORDER BY Code",
        {"trace": trace_id},
    ).rows
    scores = store.query(
        "SELECT Metric, Value, Label, Scorer, RunId, Explanation FROM scores FINAL "
        "WHERE TraceId = {trace:String} ORDER BY Metric",
        {"trace": trace_id},
    ).rows
    flagged = {span_id for _, _, _, span_id in alerts}
    tree = _table(
        ("span", "operation", "agent / tool", "arguments", "status", "ms"),
        (
            (
                "&nbsp;" * 4 * depth
                + ("⚑ " if span_id in flagged else "")
                + f"{_text(name)} <code class=muted>{_text(span_id)}</code>",
                _text(operation),
                _text(tool or agent),
                f"<code>{_text(_shorten(arguments))}</code>",
                _text(error or status),
                f"{duration / 1e6:,.1f}",
            )
            for depth, (span_id, _, name, operation, agent, tool, arguments, status, error,
                        duration, *_rest) in _depth_first(spans)
        ),
    )  # fmt: skip
    service, tenant, conversation = spans[0][10], spans[0][11], spans[0][12]
    head = (
        f"<p><a href='/'>&larr; alerts</a></p><p class=muted>tenant {_text(tenant)} · "
        f"service {_text(service)} · conversation {_text(conversation) or '-'}</p>"
    )
    alert_table = _table(
        ("code", "severity", "reason", "span"),
        (
            (f"<b>{_text(c)}</b>", f"<span class={_text(s)}>{_text(s)}</span>", _text(r),
             f"<code>{_text(span)}</code>")
            for c, s, r, span in alerts
        ),
    )  # fmt: skip
    score_table = _table(
        ("metric", "value", "label", "scorer", "run", "explanation"),
        (
            (_text(m), "-" if v is None else f"{v:.3f}", _text(lb), _text(sc), _text(run),
             _text(_shorten(why)))
            for m, v, lb, sc, run, why in scores
        ),
    )  # fmt: skip
    body = (
        head
        + f"<h2>Spans ({len(spans)})</h2>{tree}"
        + f"<h2>Alerts ({len(alerts)})</h2>{alert_table}"
        + f"<h2>Scores ({len(scores)})</h2>{score_table}"
    )
    return _page(f"trace {trace_id}", body)


def message_page(title: str, text: str) -> str:
    """A page that only says `text` (not found, a store error)."""
    return _page(title, f"<p><a href='/'>&larr; alerts</a></p><p>{_text(text)}</p>")


def _depth_first(spans: Sequence[Sequence[Any]]) -> list[tuple[int, Sequence[Any]]]:
    """Spans as (depth, row) in tree order (children after their parent, by start time);
    spans whose parent is not stored start their own subtree."""
    ids = {row[0] for row in spans}
    children: dict[str, list[Sequence[Any]]] = {}
    roots = []
    for row in spans:
        parent = row[1]
        if parent and parent in ids:
            children.setdefault(parent, []).append(row)
        else:
            roots.append(row)
    ordered: list[tuple[int, Sequence[Any]]] = []
    stack = [(0, row) for row in reversed(roots)]
    while stack:
        depth, row = stack.pop()
        ordered.append((depth, row))
        stack.extend((depth + 1, child) for child in reversed(children.get(row[0], [])))
    return ordered


def _trace_link(trace_id: str) -> str:
    return f"<a href='/trace/{_text(trace_id)}'><code>{_text(trace_id[:12])}…</code></a>"


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(value: Any) -> str:
    return html.escape(str(value))


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """An HTML table of already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body or '<tr><td class=muted>none</td></tr>'}</table>"


def _page(title: str, body: str, refresh_s: int | None = None) -> str:
    refresh = f"<meta http-equiv=refresh content={refresh_s}>" if refresh_s else ""
    return (
        f"<!doctype html><html><head><meta charset=utf-8>{refresh}"
        f"<title>{_text(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{_text(title)}</h1>{body}</body></html>"
    )
