"""Canonical data model, GenAI convention names and mappings, ClickHouse DDL, wire names,
the `Store` protocol and the shared Kafka consumer-group member (`consumer`).

Imports nothing of pathgrade's own; every other package builds on it.
"""
