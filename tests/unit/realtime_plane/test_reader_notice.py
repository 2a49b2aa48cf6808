"""The realtime plane says so in its log when the OTLP reader extension is not built."""

from __future__ import annotations

import logging

import pytest
from pathgrade.content import otlp
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.plane import RealtimePlane

CONFIG = RealtimeConfig(
    bootstrap_servers="127.0.0.1:1", alerts_topic=None, sampled_topic=None, turns_topic=None
)


def _notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "OTLP reader" in r.getMessage()]


def test_a_plane_without_the_reader_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp, "read_traces", None)
    with caplog.at_level(logging.WARNING):
        RealtimePlane(CONFIG)
    (notice,) = _notices(caplog)
    assert "is not built" in notice and "C compiler" in notice


def test_a_plane_with_the_reader_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    assert otlp.reader_built(), "pathgrade.content._otlp_reader is not built"
    with caplog.at_level(logging.WARNING):
        RealtimePlane(CONFIG)
    assert _notices(caplog) == []
