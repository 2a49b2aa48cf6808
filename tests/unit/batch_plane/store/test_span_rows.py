"""Canonical spans -> `spans` columns, attribute text as the OTel ClickHouse exporter writes."""

from __future__ import annotations

from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, attribute_text, span_row
from pathgrade.schemas.model import GenAIFields, Span, SpanEvent


def test_attribute_text_matches_the_exporter_forms() -> None:
    assert attribute_text("x") == "x"
    assert attribute_text(True) == "true"
    assert attribute_text(42) == "42"
    assert attribute_text(0.5) == "0.5"
    assert attribute_text(b"\x00\x01") == "AAE="
    assert attribute_text(["a", 1, False]) == '["a",1,false]'
    assert attribute_text({"k": [1, 2]}) == '{"k":[1,2]}'


def test_row_has_every_column_in_order() -> None:
    span = Span(
        tenant="acme", trace_id="ab" * 16, span_id="cd" * 8, parent_span_id="",
        name="execute_tool lookup_order", kind="Internal", start_ns=100, end_ns=350,
        attributes={"n": 3}, events=[SpanEvent(120, "retry", {"attempt": 2})],
        genai=GenAIFields(operation="execute_tool", tool_name="lookup_order", input_tokens=5),
    )  # fmt: skip
    row = dict(zip(SPAN_COLUMNS, span_row(span), strict=True))
    assert row["Duration"] == 250
    assert row["SpanAttributes"] == {"n": "3"}
    assert row["Events.Name"] == ["retry"] and row["Events.Attributes"] == [{"attempt": "2"}]
    assert row["GenAIToolName"] == "lookup_order" and row["GenAIInputTokens"] == 5
    assert row["GenAIOutputTokens"] is None
    assert row["Tenant"] == "acme"
