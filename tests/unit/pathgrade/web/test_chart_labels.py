"""The alerts chart's time axis: labels one every the same number of intervals, from the
first, so round intervals keep round labels."""

from __future__ import annotations

import re

from pathgrade.web.svg import stacked_bars


def axis_labels(svg: str) -> list[str]:
    return re.findall(r'class="axis" text-anchor="(?:middle|end)">(\d\d:\d\d)</text>', svg)


def test_five_minute_intervals_over_an_hour_are_labelled_every_fifteen_minutes() -> None:
    buckets = [f"{19 + (5 + 5 * i) // 60}:{(5 + 5 * i) % 60:02d}" for i in range(13)]
    assert buckets[0] == "19:05" and buckets[-1] == "20:05"
    svg = stacked_bars(buckets, {"PG101": [1] * 13})
    assert axis_labels(svg) == ["19:05", "19:20", "19:35", "19:50", "20:05"]


def test_few_intervals_are_each_labelled() -> None:
    svg = stacked_bars(["10:00", "10:10", "10:20"], {"PG101": [0, 2, 1]})
    assert axis_labels(svg) == ["10:00", "10:10", "10:20"]
