"""A trace as a consumer of the spans topic sees it behind pathgrade's collector: on
default settings (facts only, no content) or with capture on (content scrubbed, facts
too), the facts computed from each span's content as the collector computes them."""

from __future__ import annotations

import dataclasses
from typing import Any

from pathgrade.content.facts_producer import compute_facts
from pathgrade.content.fingerprints import FactSecret, TenantKey
from pathgrade.content.pii import PiiScanner
from pathgrade.content.predicates import RequestPatterns
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace

KEY = FactSecret(b"s" * 32).for_tenant("default")
SCANNER = PiiScanner()
CONTENT_FIELDS = ("tool_arguments", "tool_result", "input_messages", "output_messages")


def facts_only(
    trace: Trace,
    scrub: bool = False,
    requests: dict[str, tuple[str, ...]] | None = None,
    key: TenantKey = KEY,
) -> Trace:
    """`trace` as a consumer sees it on default settings: the facts the collector computes
    from each span's content, and no content (with `scrub`: capture on instead, the
    content kept but scrubbed, as the collector forwards it). `requests`: the policy's
    request patterns the collector matches on each turn's request (`pathgrade.facts.requests`);
    `key`: the tenant's fingerprint key (another one: as a collector after a rotation)."""
    patterns = RequestPatterns(requests) if requests else None
    spans = []
    for span in trace.spans:
        facts = compute_facts(span.genai, span.attributes, key, SCANNER, requests=patterns)
        if scrub:
            content = {k: SCANNER.scrub(getattr(span.genai, k))[0] for k in CONTENT_FIELDS}
            attributes = {k: _scrubbed(v) for k, v in span.attributes.items()}
        else:
            content = dict.fromkeys(CONTENT_FIELDS, "")
            attributes = {k: v for k, v in span.attributes.items() if not genai.is_content_key(k)}
        attributes.update(facts)
        spans.append(
            dataclasses.replace(
                span, attributes=attributes, genai=dataclasses.replace(span.genai, **content)
            )
        )
    return Trace(trace.tenant, trace.trace_id, spans)


def _scrubbed(value: Any) -> Any:
    return SCANNER.scrub(value)[0] if isinstance(value, str) else value
