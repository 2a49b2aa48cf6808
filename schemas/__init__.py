"""Canonical data model, GenAI convention names and mappings, ClickHouse DDL, wire names.

Imports nothing of pathgrade's own; every other package builds on it.
"""
