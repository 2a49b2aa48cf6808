"""Kafka consumers for live traffic: trace assembly, detector runs, alerts, sampling."""

from pathgrade.realtime_plane.assembler import DueTrace, TraceAssembler
from pathgrade.realtime_plane.config import RealtimeConfig, SamplerRates
from pathgrade.realtime_plane.evaluate import Evaluation, TraceEvaluator
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.realtime_plane.sampler import Sampler
from pathgrade.realtime_plane.sinks import AlertSink, StoreAlertSink, WebhookSink

__all__ = [
    "AlertSink",
    "DueTrace",
    "Evaluation",
    "RealtimeConfig",
    "RealtimePlane",
    "Sampler",
    "SamplerRates",
    "StoreAlertSink",
    "TraceAssembler",
    "TraceEvaluator",
    "WebhookSink",
]
