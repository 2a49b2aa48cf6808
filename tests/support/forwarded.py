"""Spans as a producer without pathgrade's redaction publishes them (an OTel Collector's
Kafka exporter): for tests of grouping and of readers of such messages."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from pathgrade.collector.forwarded import (
    ForwardedResource,
    ForwardedScope,
    ForwardedSpan,
    ForwardedSpans,
)
from pathgrade.collector.redact import RedactionStats


def as_published(request: ExportTraceServiceRequest) -> ForwardedSpans:
    """Every span of `request` forwarded as it is (no redaction step: the collector's own
    are made by `Redactor.forward` only)."""
    resources = [_resource(resource) for resource in request.resource_spans]
    spans = sum(len(scope.spans) for resource in resources for scope in resource.scopes)
    return ForwardedSpans(resources, RedactionStats(spans=spans))


def _resource(holder: ResourceSpans) -> ForwardedResource:
    scopes = [_scope(scope) for scope in holder.scope_spans]
    return ForwardedResource(holder.resource.SerializeToString(), holder.schema_url, scopes)


def _scope(holder: ScopeSpans) -> ForwardedScope:
    spans = [ForwardedSpan(s.trace_id, s.span_id, s.SerializeToString()) for s in holder.spans]
    return ForwardedScope(holder.scope.SerializeToString(), holder.schema_url, spans)
