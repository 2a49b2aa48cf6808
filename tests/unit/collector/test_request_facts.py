"""Request facts at the collector: with a policy's `requests`, every span whose input
messages hold a user message records which writes that request asked for
(`pathgrade.facts.requests`), from the same definition the detectors use; no content
leaves. The fact kernel leaves such spans to Python, which gives the same attributes as a
collector without the kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.collector.config import load_request_patterns
from pathgrade.collector.facts import DECLINED_FALLBACK, FactMaker
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.pii import PiiScanner
from pathgrade.content.predicates import RequestPatterns
from pathgrade.schemas import facts

from pathgrade.demo.sender import send_demo_traces

POLICY = """\
defaults:
  tools: {writes: [change_plan, open_dispute]}
  requests:
    change_plan: ["\\\\b(downgrade|upgrade|switch|plan)\\\\b"]
services:
  billing:
    requests:
      open_dispute: ["\\\\bdispute\\\\b"]
"""


def _redacted(body: bytes, requests: RequestPatterns | None, native: bool) -> list:
    maker = FactMaker(FactSecret(bytes(range(32))), PiiScanner(()), native, requests)
    request = ExportTraceServiceRequest.FromString(body)
    Redactor(RedactionConfig(), maker).redact(request, "acme", body)
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def test_the_policy_s_requests_of_every_section_are_joined(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    patterns = load_request_patterns(policy)
    assert patterns.asked("I want to DOWNGRADE") == {"change_plan": True, "open_dispute": False}
    assert patterns.asked("open a dispute") == {"change_plan": False, "open_dispute": True}
    assert not load_request_patterns(None)
    policy.write_text("defaults:\n  requests:\n    change_plan: ['(']\n")
    with pytest.raises(ValueError, match=r"policy\.yaml: requests\.change_plan: invalid"):
        load_request_patterns(policy)
    policy.write_text("services:\n  a:\n    requests: [x]\n")
    with pytest.raises(ValueError, match=r"services\.a\.requests: expected a mapping"):
        load_request_patterns(policy)


def test_spans_with_a_user_message_get_request_facts_the_same_with_or_without_the_kernel(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    requests = load_request_patterns(policy)
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=30, seed=3)
    body = encode_spans(list(exporter.get_finished_spans())).SerializeToString()
    by_kernel, by_python = _redacted(body, requests, True), _redacted(body, requests, False)
    recorded = []
    for a, b in zip(by_kernel, by_python, strict=True):
        ours = {kv.key: kv.value.SerializeToString() for kv in a.attributes}
        assert ours == {kv.key: kv.value.SerializeToString() for kv in b.attributes}, a.name
        found = next((kv.value.string_value for kv in a.attributes if kv.key == facts.REQUESTS), "")
        if found:
            recorded.append(json.loads(found))
    assert recorded and all(set(r) == {"change_plan", "open_dispute"} for r in recorded)
    assert {True, False} <= {r["change_plan"] for r in recorded}  # the requests differ
    without = _redacted(body, None, True)  # no patterns: no fact, the kernel decides as before
    assert not any(kv.key == facts.REQUESTS for s in without for kv in s.attributes)
    maker = FactMaker(FactSecret(bytes(range(32))), PiiScanner(()), True, requests)
    answers = maker.request_facts(body, "acme", True) or []
    assert DECLINED_FALLBACK in answers  # spans with input messages are left to Python
