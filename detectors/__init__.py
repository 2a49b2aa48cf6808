"""Deterministic detectors: pure functions (trace, params) -> findings, with stable codes."""
