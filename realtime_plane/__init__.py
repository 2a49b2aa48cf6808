"""Kafka consumers for live traffic: trace assembly, detector runs, the alert sinks
(`AlertSink`: log line, alerts topic, `alerts` table, webhook), sampling.

May import `schemas`, `content`, `transport` and `detectors`; never another plane or `pathgrade`.
"""
