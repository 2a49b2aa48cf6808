"""Canonical data model, GenAI convention names and mappings, ClickHouse DDL, wire names
and the `Store` protocol: definitions only. The algorithms over span content (decoding,
the convention mapping's reader, personal data, predicates, fingerprints, facts) are
`pathgrade.content`'s, a layer above.

Imports nothing of pathgrade's own, and of other libraries only pydantic and
opentelemetry-proto; every other package builds on it.
"""
