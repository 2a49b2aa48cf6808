"""The trace page speaks of the turns within a trace: three agent runs in one trace (inside
one HTTP server span) are listed as three turns, each with the findings raised on it."""

from __future__ import annotations

import time

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.content.conventions import genai_fields
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.model import Span
from starlette.testclient import TestClient

from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

TRACE = "7a" * 16


def _span(span_id: str, parent: str, name: str, start: int, attributes: dict) -> Span:
    return Span("default", TRACE, span_id, parent, name, "Internal", start, start + 10**6,
                "shop", attributes=attributes, genai=genai_fields(name, attributes))  # fmt: skip


def test_three_agent_runs_are_three_turns_with_their_own_findings(store: ClientStore) -> None:
    now = time.time_ns()
    agent = {"gen_ai.operation.name": "invoke_agent"}
    spans = [_span("5e" * 8, "", "POST /chat", now, {})]
    spans += [_span(f"{n:016x}", "5e" * 8, f"invoke_agent run-{n}", now + n * 10**6, agent)
              for n in (1, 2, 3)]  # fmt: skip
    store.insert("spans", span_rows(spans), list(SPAN_COLUMNS))
    second = f"{2:016x}"
    alert = Alert(
        alert_key="k", code="PG110", name="orphan-write", severity="high", kind="violation",
        reason="Write open_dispute that the turn's request did not ask for.", trace_id=TRACE,
        span_id=second, tenant="default", service="shop", agent="", conversation_id="",
        risk_tier="medium", policy="default", trace_start_ns=now, trace_end_ns=now,
        detected_at_ns=now, turn_span_id=second,
    )  # fmt: skip
    store.insert("alerts", [alert.row()], list(ALERT_COLUMNS))
    client = TestClient(create_app(UiSettings(store)), base_url="http://127.0.0.1:8080")
    page = client.get(f"/trace/{TRACE}").text
    assert 'id="turns"' in page
    assert [f"turn {n}: invoke_agent run-{n}" in page for n in (1, 2, 3)] == [True] * 3
    listed = page[page.index('id="turns"') : page.index("</ol>")]
    assert listed.count("0 findings") == 2 and listed.count("1 findings") == 1
