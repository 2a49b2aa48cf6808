"""Kafka consumers for live traffic: trace assembly, detector runs, alerts, sampling."""

from realtime_plane.assembler import DueTrace, TraceAssembler
from realtime_plane.config import RealtimeConfig, SamplerRates
from realtime_plane.evaluate import Evaluation, TraceEvaluator
from realtime_plane.plane import RealtimePlane
from realtime_plane.sampler import Sampler
from realtime_plane.sinks import StoreAlertSink, WebhookSink

__all__ = [
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
