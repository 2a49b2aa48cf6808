"""Agent adapters: how the batch plane calls the agent under test (a Python callable or an
HTTP endpoint) and tags the spans it emits with pathgrade's evaluation context.

Imports `schemas` and `content` only; used by `edge` (simulation) and `evaluation` (runs, replay).
"""
