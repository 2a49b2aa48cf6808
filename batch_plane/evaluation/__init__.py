"""Evaluation lifecycle: datasets, runs, replay, suites and the release gate (its inputs,
reports and records).

May import `scoring`, `agents` and `store` (and `schemas`, `content`, `detectors`); nothing
imports it but `pathgrade`.
"""
