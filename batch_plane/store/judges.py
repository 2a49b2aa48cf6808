"""Typed reads of the judges' tables: `judge_cache` (a verdict per cache key) and
`judge_calibrations` (a calibration per judge model and rubric version), both with
`FINAL`."""

from __future__ import annotations

from pathgrade.schemas.store import ReadableStore


def cached(store: ReadableStore, key: str) -> tuple[str, int, int, float | None] | None:
    """(output JSON, input tokens, output tokens, cost USD) cached under `key`; None when
    nothing is."""
    rows = store.query(
        "SELECT Output, InputTokens, OutputTokens, CostUsd FROM judge_cache FINAL "
        "WHERE CacheKey = {key:String} LIMIT 1",
        {"key": key},
    ).rows
    return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None


def calibrated(store: ReadableStore, model: str, rubric_version: str) -> bool:
    """Whether (judge model, rubric version) has a stored calibration."""
    rows = store.query(
        "SELECT count() FROM judge_calibrations FINAL "
        "WHERE Model = {model:String} AND RubricVersion = {rubric:String}",
        {"model": model, "rubric": rubric_version},
    ).rows
    return bool(rows and rows[0][0])
