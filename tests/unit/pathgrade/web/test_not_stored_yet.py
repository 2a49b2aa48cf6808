"""An alert's trace link opened before the store writer wrote the trace's spans: the page
says they are on their way and reloads itself; a trace nobody alerted on (or another
tenant's) is plainly not found, and the link works once the spans are stored."""

from __future__ import annotations

import time
from pathlib import Path

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.model import Span
from starlette.testclient import TestClient

from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from pathgrade.web.viewers import Viewers
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

ALERTED, OTHERS, NOBODYS = "a1" * 16, "b2" * 16, "c3" * 16
RELOAD = '<meta http-equiv="refresh"'


def alert(tenant: str, trace_id: str) -> list[object]:
    now = time.time_ns()
    return Alert(
        alert_key=f"{tenant}-{trace_id}", code="PG110", name="orphan-write", severity="high",
        kind="violation", reason="write on a read turn", trace_id=trace_id, span_id="1" * 16,
        tenant=tenant, service="svc", agent="agent", conversation_id="", risk_tier="medium",
        policy="default", trace_start_ns=now - 10**9, trace_end_ns=now, detected_at_ns=now,
    ).row()  # fmt: skip


def test_an_alerted_trace_not_stored_yet_reloads_until_its_spans_are(
    store: ClientStore, tmp_path: Path
) -> None:
    store.insert("alerts", [alert("a", ALERTED), alert("b", OTHERS)], list(ALERT_COLUMNS))
    operator = TestClient(create_app(UiSettings(store)), base_url="http://127.0.0.1")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tok-a: a\n")
    tenant_a = TestClient(
        create_app(UiSettings(store, Viewers(tokens))), base_url="http://ui.example",
        headers={"Authorization": "Bearer tok-a"},
    )  # fmt: skip

    coming = operator.get(f"/trace/{ALERTED}")
    assert coming.status_code == 404 and RELOAD in coming.text
    assert "not stored yet" in coming.text
    for client, trace_id in ((operator, NOBODYS), (tenant_a, OTHERS)):
        absent = client.get(f"/trace/{trace_id}")
        assert absent.status_code == 404, trace_id
        assert RELOAD not in absent.text and "no stored span" in absent.text, trace_id

    now = time.time_ns()
    root = Span("a", ALERTED, "1" * 16, "", "chat", "Client", now - 10**9, now)
    store.insert("spans", span_rows([root]), list(SPAN_COLUMNS))
    stored = operator.get(f"/trace/{ALERTED}")
    assert stored.status_code == 200 and RELOAD not in stored.text
