"""`run_detectors`: every detector the resolved policy enables, over one trace; each rule
isolated from the others."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter

from pathgrade.detectors.finding import Finding
from pathgrade.detectors.policy import ResolvedPolicy
from pathgrade.detectors.registry import DETECTOR_ERROR, REGISTRY
from pathgrade.detectors.view import DetectorContext
from pathgrade.schemas.model import Trace

log = logging.getLogger(__name__)


def run_detectors(
    trace: Trace,
    policy: ResolvedPolicy,
    context: DetectorContext | None = None,
    errors: Counter[str] | None = None,
) -> list[Finding]:
    """Findings of all enabled detectors, in code order, with policy severity overrides.

    `context` carries earlier turns of the conversation; None means no history. A rule
    that raises does not take the others down: its exception is logged, counted under
    its code in `errors`, and it reports cannot-decide for this trace (fail closed).
    """
    context = context or policy.context()
    view = context.view_of(trace)
    findings: list[Finding] = []
    for code, params in policy.params.items():
        rule = REGISTRY[code]
        assert rule.function is not None, f"{code} has no function"
        try:
            found = rule.function(view, params, context)
        except Exception as exc:
            log.exception("detector %s %s failed on trace %s", code, rule.name, trace.trace_id)
            if errors is not None:
                errors[code] += 1
            reason = f"{rule.name} failed ({type(exc).__name__}); its verdict is unknown."
            found = [rule.cannot_decide(view, DETECTOR_ERROR, reason)]
        severity = policy.severities.get(code)
        findings += (
            [dataclasses.replace(f, severity=severity) for f in found] if severity else found
        )
    return findings
