"""The OTLP span exporter an agent under test (or the demo agent) writes to: the official
exporter for a URL, and a wrapper that counts what it failed to deliver."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def exporter_for_url(otlp_url: str, headers: dict[str, str] | None = None) -> SpanExporter:
    """The official OTLP span exporter for http(s)://host:port or grpc://host:port."""
    parts = urlsplit(otlp_url)
    accepted = "http://host:port or https://host:port (optionally ending in /v1/traces) or grpc://host:port"
    if parts.scheme not in ("http", "https", "grpc") or not parts.netloc:
        raise ValueError(f"otlp_url {otlp_url!r} is not an OTLP endpoint; use {accepted}")
    if parts.scheme == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=parts.netloc, insecure=True, headers=headers)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    endpoint = otlp_url.rstrip("/")
    if not endpoint.endswith("/v1/traces"):
        endpoint += "/v1/traces"
    return HttpSpanExporter(endpoint=endpoint, headers=headers)


class RecordingExporter(SpanExporter):
    """Wraps an exporter and counts the batches and spans it failed to deliver."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed_batches = 0
        self.failed_spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed_batches += 1
            self.failed_spans += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
