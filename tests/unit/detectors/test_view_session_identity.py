"""TraceView.session_identity: the root span first, then every span, each span's own
attributes before its resource's; a mapping shared by several spans is read once."""

from __future__ import annotations

from typing import Any

import pytest
from pathgrade.detectors import view
from pathgrade.detectors.conventions import Conventions
from pathgrade.detectors.view import TraceView
from pathgrade.schemas.genai import ENDUSER_ID
from pathgrade.schemas.model import Span, Trace


def _span(span_id: str, parent: str, start_ns: int, resource: dict, **attributes: Any) -> Span:
    return Span("t", "a" * 32, span_id, parent, "step", "Internal", start_ns, start_ns + 1,
                resource_attributes=resource, attributes=attributes)  # fmt: skip


def _identity(trace: Trace) -> str:
    return TraceView(trace, Conventions()).session_identity


def test_the_root_spans_identity_wins_over_an_earlier_span() -> None:
    shared: dict = {}
    early = _span("b", "a", 1, shared, **{ENDUSER_ID: "child-user"})
    root = _span("a", "", 2, shared, **{ENDUSER_ID: "root-user"})
    assert _identity(Trace("t", "a" * 32, [early, root])) == "root-user"


def test_a_spans_own_identity_wins_over_its_resources() -> None:
    span = _span("a", "", 1, {ENDUSER_ID: "resource-user"}, **{ENDUSER_ID: "span-user"})
    assert _identity(Trace("t", "a" * 32, [span])) == "span-user"


def test_the_identity_of_a_later_spans_resource_is_found() -> None:
    root = _span("a", "", 1, {})
    later = _span("b", "a", 2, {ENDUSER_ID: "resource-user"})
    assert _identity(Trace("t", "a" * 32, [root, later])) == "resource-user"


def test_no_identity_reads_each_mapping_once(monkeypatch: pytest.MonkeyPatch) -> None:
    shared: dict = {"service.name": "svc"}
    spans = [_span(f"{n}", "" if n == 0 else "0", n, shared) for n in range(5)]
    reads: list[int] = []
    read = view.session_identity
    monkeypatch.setattr(view, "session_identity", lambda a: reads.append(id(a)) or read(a))
    assert _identity(Trace("t", "a" * 32, spans)) == ""
    assert sorted(reads) == sorted({id(shared), *(id(s.attributes) for s in spans)})
