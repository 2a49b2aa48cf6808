"""`run_detectors`: every detector the resolved policy enables, over one trace."""

from __future__ import annotations

import dataclasses

from pathgrade.detectors.finding import Finding
from pathgrade.detectors.policy import ResolvedPolicy
from pathgrade.detectors.registry import REGISTRY
from pathgrade.detectors.view import DetectorContext
from pathgrade.schemas.model import Trace


def run_detectors(
    trace: Trace, policy: ResolvedPolicy, context: DetectorContext | None = None
) -> list[Finding]:
    """Findings of all enabled detectors, in code order, with policy severity overrides.

    `context` carries earlier turns of the conversation; None means no history.
    """
    context = context or policy.context()
    view = context.view_of(trace)
    findings: list[Finding] = []
    for code, params in policy.params.items():
        rule = REGISTRY[code]
        assert rule.function is not None, f"{code} has no function"
        found = rule.function(view, params, context)
        severity = policy.severities.get(code)
        findings += (
            [dataclasses.replace(f, severity=severity) for f in found] if severity else found
        )
    return findings
