"""The browser view: alerts overview and trace page over a real embedded store."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.otlp import decode_spans_message

from pathgrade.demo import send_demo_traces
from pathgrade.web import ui
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)


def stored_demo_trace(store: ClientStore) -> tuple[str, str]:
    """Store the spans of one demo trace; (trace id, id of a child span)."""
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=1, seed=21)
    data = encode_spans(exporter.get_finished_spans()).SerializeToString()
    spans = decode_spans_message(data, "acme", 1)
    store.insert("spans", span_rows(spans), list(SPAN_COLUMNS))
    child = next(s for s in spans if s.parent_span_id)
    return spans[0].trace_id, child.span_id


def test_overview_lists_alerts_escaped_and_links_their_trace(store: ClientStore) -> None:
    trace_id, span_id = stored_demo_trace(store)
    alert = Alert(
        alert_key="k1", code="PG110", name="orphan-write", severity="high", kind="violation",
        reason="Write <script>alert(1)</script> on a read turn", trace_id=trace_id,
        span_id=span_id, tenant="acme", service="support-agent", agent="support",
        conversation_id="c1", risk_tier="medium", policy="default", trace_start_ns=1,
        trace_end_ns=2, detected_at_ns=1_796_000_000_000_000_000,
    )  # fmt: skip
    store.insert("alerts", [alert.row()], list(ALERT_COLUMNS))
    page = ui.overview_page(store)
    assert "PG110" in page and f"/trace/{trace_id}" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "1 alerts" in page and "http-equiv=refresh" in page

    write_scores(store, [Score("faithfulness", "judge:faithfulness", "1", "acme", trace_id,
                               value=0.75, label="pass", run_id="run-9")])  # fmt: skip
    trace = ui.trace_page(store, trace_id)
    assert trace is not None
    assert "PG110" in trace and "faithfulness" in trace and "0.750" in trace and "run-9" in trace
    assert "⚑ " in trace  # the alerted span is flagged in the tree
    names = [line for line in trace.split("<tr>") if "execute_tool" in line or "chat" in line]
    assert names and all("&nbsp;" in line for line in names)  # children are indented
    assert ui.trace_page(store, "f" * 32) is None
