"""Canonical data model, GenAI convention names and mappings, ClickHouse DDL, wire names
and the `Store` protocol.

Imports nothing of pathgrade's own, and of other libraries only pydantic and
opentelemetry-proto; every other package builds on it.
"""
