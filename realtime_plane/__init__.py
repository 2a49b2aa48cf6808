"""Kafka consumers for live traffic: trace assembly, detector runs, the alert sinks
(`AlertSink`: log line, alerts topic, `alerts` table, webhook), sampling.

May import `schemas`, `transport` and `detectors`; never another plane or `pathgrade`.
"""

from pathgrade.realtime_plane.assembler import DueTrace, TraceAssembler
from pathgrade.realtime_plane.config import RealtimeConfig, SamplerRates
from pathgrade.realtime_plane.evaluate import Evaluation, TraceEvaluator
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.realtime_plane.sampler import Sampler
from pathgrade.realtime_plane.sinks import (
    AlertSink,
    LogAlertSink,
    StoreAlertSink,
    TopicAlertSink,
    WebhookSink,
)

__all__ = [
    "AlertSink",
    "DueTrace",
    "Evaluation",
    "LogAlertSink",
    "RealtimeConfig",
    "RealtimePlane",
    "Sampler",
    "SamplerRates",
    "StoreAlertSink",
    "TopicAlertSink",
    "TraceAssembler",
    "TraceEvaluator",
    "WebhookSink",
]
