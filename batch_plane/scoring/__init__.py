"""Scoring: trajectory scorers and matching, judges, rubrics, calibration, hallucination
checks, the per-trace scorer set shared online and offline, the online scorer, score rows.

May import `store` (and `schemas`, `content`, `transport`, `detectors`); never `edge` or
`evaluation`.
"""
