"""Evaluation results out: every stored score and alert sent as an OTLP log record to an
endpoint a team points pathgrade at, at least once, from the tables (docs/stack.md).

May import `store` (and `schemas`, `content`); nothing imports it but `pathgrade/`.
"""
