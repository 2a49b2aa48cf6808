"""Charts drawn on the server as SVG: no script and nothing fetched to see them.

Each bar and segment carries a `<title>` (the browser's own tooltip) with its numbers, and
a link where it leads to the rows behind it.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
)  # fmt: skip


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Chart:
    width: int = 900
    height: int = 220
    left: int = 44
    bottom: int = 26
    top: int = 10


def stacked_bars(
    buckets: Sequence[str],
    series: Mapping[str, Sequence[int]],
    link: Callable[[str, int], str] | None = None,
    chart: Chart | None = None,
) -> str:
    """Bars per bucket, one stacked segment per series (legend below); `link(series,
    bucket index)` is where a segment leads."""
    chart = chart or Chart()
    names = list(series)
    totals = [sum(series[n][i] for n in names) for i in range(len(buckets))]
    peak = max(totals, default=0) or 1
    plot_w = chart.width - chart.left - 8
    plot_h = chart.height - chart.top - chart.bottom
    step = plot_w / max(len(buckets), 1)
    bar_w = max(step * 0.8, 1.0)
    parts = [
        f'<svg class="chart" viewBox="0 0 {chart.width} {chart.height + 20 * _legend_rows(names)}"'
        f' role="img" aria-label="alerts per interval by code">'
    ]
    for fraction in (0, 0.5, 1):
        y = chart.top + plot_h * (1 - fraction)
        parts.append(
            f'<line x1="{chart.left}" x2="{chart.width - 8}" y1="{y:.1f}" y2="{y:.1f}" '
            f'class="grid"/><text x="{chart.left - 6}" y="{y + 4:.1f}" class="axis" '
            f'text-anchor="end">{round(peak * fraction):,}</text>'
        )
    for index, bucket in enumerate(buckets):
        x = chart.left + index * step + (step - bar_w) / 2
        y = chart.top + plot_h
        for number, name in enumerate(names):
            value = series[name][index]
            if not value:
                continue
            h = plot_h * value / peak
            y -= h
            rect = (
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{color(number)}"><title>{_e(name)}: {value:,} ({_e(bucket)})</title></rect>'
            )
            parts.append(f'<a href="{_e(link(name, index))}">{rect}</a>' if link else rect)
    positions = _label_positions(len(buckets))
    for index in positions:
        x = chart.left + index * step + step / 2
        anchor = "end" if index == len(buckets) - 1 and len(positions) > 1 else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{chart.height - 8}" class="axis" text-anchor="{anchor}">'
            f"{_e(buckets[index])}</text>"
        )
    for number, name in enumerate(names):
        row, column = divmod(number, 6)
        x, y = chart.left + column * 140, chart.height + 6 + row * 20
        parts.append(
            f'<rect x="{x}" y="{y}" width="12" height="12" fill="{color(number)}"/>'
            f'<text x="{x + 17}" y="{y + 11}" class="legend">{_e(name)} ({sum(series[name]):,})'
            "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Point:
    """One evaluation on a line chart: its label, the figure (None: nothing to draw), the
    interval around it, whether it was firing and where it leads."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    firing: bool = False
    link: str = ""


def line_chart(
    points: Sequence[Point], threshold: float, name: str, chart: Chart | None = None
) -> str:
    """A figure over time as a line, its interval as a band, the threshold as a dashed
    line; firing points in red. Each point links where its `link` says."""
    chart = chart or Chart(height=180)
    values = [v for p in points for v in (p.value, p.low, p.high) if v is not None]
    low, high = min([*values, threshold]), max([*values, threshold])
    pad = (high - low) * 0.08 or abs(threshold) * 0.5 or 1.0
    low, high = low - pad, high + pad
    plot_w = chart.width - chart.left - 8
    plot_h = chart.height - chart.top - chart.bottom
    step = plot_w / max(len(points) - 1, 1)

    def x(index: int) -> float:
        return chart.left + index * step

    def y(value: float) -> float:
        return chart.top + plot_h * (1 - (value - low) / (high - low))

    parts = [
        f'<svg class="chart monitor" viewBox="0 0 {chart.width} {chart.height}" role="img" '
        f'aria-label="{_e(name)}: figure against threshold {threshold:g}">'
    ]
    for value in (low + pad, (low + high) / 2, high - pad):
        parts.append(
            f'<line x1="{chart.left}" x2="{chart.width - 8}" y1="{y(value):.1f}" '
            f'y2="{y(value):.1f}" class="grid"/><text x="{chart.left - 6}" '
            f'y="{y(value) + 4:.1f}" class="axis" text-anchor="end">{value:.3g}</text>'
        )
    band = [(i, p) for i, p in enumerate(points) if p.low is not None and p.high is not None]
    if band:
        upper = " ".join(f"{x(i):.1f},{y(p.high):.1f}" for i, p in band)  # type: ignore[arg-type]
        lower = " ".join(f"{x(i):.1f},{y(p.low):.1f}" for i, p in reversed(band))  # type: ignore[arg-type]
        parts.append(f'<polygon class="band" points="{upper} {lower}"/>')
    parts.append(
        f'<line class="threshold" x1="{chart.left}" x2="{chart.width - 8}" '
        f'y1="{y(threshold):.1f}" y2="{y(threshold):.1f}"><title>threshold {threshold:g}'
        "</title></line>"
    )
    for run in _runs(points):
        line = " ".join(f"{x(i):.1f},{y(points[i].value):.1f}" for i in run)  # type: ignore[arg-type]
        parts.append(f'<polyline class="figure" points="{line}"/>')
    for index, point in enumerate(points):
        if point.value is None:
            continue
        interval = "" if point.low is None else f" ({point.low:.3g} to {point.high:.3g})"
        dot = (
            f'<circle cx="{x(index):.1f}" cy="{y(point.value):.1f}" r="3" '
            f'class="{"firing" if point.firing else "ok"}"><title>{_e(point.label)}: '
            f"{point.value:.4g}{interval}{' firing' if point.firing else ''}</title></circle>"
        )
        parts.append(f'<a href="{_e(point.link)}">{dot}</a>' if point.link else dot)
    positions = _label_positions(len(points))
    for index in positions:
        anchor = "end" if index == len(points) - 1 and len(positions) > 1 else "middle"
        parts.append(
            f'<text x="{x(index):.1f}" y="{chart.height - 8}" class="axis" '
            f'text-anchor="{anchor}">{_e(points[index].label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _runs(points: Sequence[Point]) -> list[list[int]]:
    """Indices of the points with a value, in unbroken runs (a gap breaks the line)."""
    runs: list[list[int]] = [[]]
    for index, point in enumerate(points):
        if point.value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(index)
    return [run for run in runs if run]


def _legend_rows(names: Sequence[str]) -> int:
    return (len(names) + 5) // 6


def _label_positions(count: int, labels: int = 6) -> list[int]:
    """Indices of the buckets whose labels are written: at most `labels`, from the first,
    one every the same number of buckets (so the labels of round intervals stay round:
    19:05, 19:20, 19:35, not 19:05, 19:15, 19:30)."""
    stride = max(1, -(-(count - 1) // (labels - 1)))
    return list(range(0, count, stride))


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
