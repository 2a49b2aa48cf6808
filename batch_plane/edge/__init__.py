"""EDGE: agent graphs (DSL, paths), simulated conversations, determinism metrics, the EDGE
store and report.

May import `scoring`, `agents` and `store` (and `schemas`, `content`); never `evaluation`.
"""
