"""The realtime plane's detection-delay window: nearest-rank quantiles over the latest delays."""

from __future__ import annotations

from pathgrade.realtime_plane.delays import MAX, P50, P99, DelayWindow


def test_no_delay_yet_reports_nothing() -> None:
    assert DelayWindow().quantiles() == {}


def test_quantiles_are_nearest_rank_over_the_window() -> None:
    window = DelayWindow()
    for millis in range(1, 1001):  # 0.001 s .. 1.000 s, shuffled order does not matter
        window.add(((millis * 7919) % 1000 + 1) / 1000)
    assert window.quantiles() == {P50: 0.5, P99: 0.99, MAX: 1.0}


def test_only_the_latest_delays_count() -> None:
    window = DelayWindow(size=3)
    for seconds in (30.0, 1.0, 1.2, 1.1):
        window.add(seconds)
    assert window.quantiles() == {P50: 1.1, P99: 1.2, MAX: 1.2}  # 30 s has left the window
