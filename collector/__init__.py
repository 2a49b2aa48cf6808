"""OTLP receivers (gRPC, HTTP), validation, redaction and publishing to Kafka.

May import `schemas` and `content` (and `transport`); never a detector, a plane or `pathgrade`.
"""
