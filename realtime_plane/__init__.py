"""Kafka consumers for live traffic: trace assembly, detectors, alerts, sampling."""
