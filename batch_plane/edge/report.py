"""EDGE report: one self-contained HTML page (tables + the graph as inline SVG), and the
graph as standalone SVG and PNG files.

The graph is drawn in layers by distance from the start node; node radius and edge width
grow with utility (the share of the busiest node's / edge's queries). The SVG is written by
hand; the PNG is drawn by matplotlib from the same layout and the same sizes.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pathgrade.schemas.agent_graph import AgentGraph

WIDTH, HEIGHT, MARGIN = 760, 440, 70
MIN_RADIUS, MAX_RADIUS = 8.0, 34.0
MIN_STROKE, MAX_STROKE = 0.75, 10.0
BEND = 0.12
Point = tuple[float, float]


def layout(graph: AgentGraph) -> dict[str, Point]:
    """Pixel positions on an ellipse, the start node at the left, then the nodes in order."""
    order = [graph.start] + [node.id for node in graph.nodes if node.id != graph.start]
    center_x, center_y = WIDTH / 2, HEIGHT / 2
    radius_x, radius_y = center_x - MARGIN - 40, center_y - MARGIN
    return {
        node: (
            center_x - radius_x * math.cos(2 * math.pi * index / len(order)),
            center_y - radius_y * math.sin(2 * math.pi * index / len(order)),
        )
        for index, node in enumerate(order)
    }


def node_radius(utility: float) -> float:
    """Node radius in pixels for a utility in [0, 1]."""
    return MIN_RADIUS + (MAX_RADIUS - MIN_RADIUS) * utility


def edge_width(utility: float) -> float:
    """Edge stroke width in pixels for a utility in [0, 1]."""
    return MIN_STROKE + (MAX_STROKE - MIN_STROKE) * utility


def utilities(utility: Mapping[str, Any]) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Node and edge utilities from node_utility()'s result."""
    nodes = {row["node"]: row["utility"] for row in utility.get("nodes", [])}
    edges = {(row["from"], row["to"]): row["utility"] for row in utility.get("edges", [])}
    return nodes, edges


def _edge_ends(start: Point, end: Point, gap: tuple[float, float]) -> tuple[Point, Point]:
    """The segment start -> end, shortened by the node radii `gap` at both ends."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    length = max(math.hypot(dx, dy), 1e-9)
    ux, uy = dx / length, dy / length
    return (start[0] + ux * gap[0], start[1] + uy * gap[0]), (
        end[0] - ux * gap[1],
        end[1] - uy * gap[1],
    )


def _gap(node_u: Mapping[str, float], source: str, target: str) -> tuple[float, float]:
    """How far an edge stops short of its two nodes' centres."""
    return node_radius(node_u.get(source, 0.0)), node_radius(node_u.get(target, 0.0))


def _bend(start: Point, end: Point) -> Point:
    """The control point of an edge's curve (BEND of its length to the side), so the two
    directions of a pair are drawn apart."""
    return (
        (start[0] + end[0]) / 2 + BEND * (end[1] - start[1]),
        (start[1] + end[1]) / 2 - BEND * (end[0] - start[0]),
    )


def graph_svg(graph: AgentGraph, utility: Mapping[str, Any]) -> str:
    """The graph as an SVG document, node size and edge width proportional to utility."""
    positions = layout(graph)
    node_u, edge_u = utilities(utility)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="4" '
        'markerHeight="4" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
        'fill="#555"/></marker></defs>',
    ]
    for source, target in sorted(graph.edge_pairs()):
        value = edge_u.get((source, target), 0.0)
        (x1, y1), (x2, y2) = start, end = _edge_ends(
            positions[source], positions[target], _gap(node_u, source, target)
        )
        cx, cy = _bend(start, end)
        parts.append(
            f'<path d="M{x1:.1f},{y1:.1f} Q{cx:.1f},{cy:.1f} {x2:.1f},{y2:.1f}" fill="none" '
            f'stroke="#555" stroke-opacity="0.6" stroke-width="{edge_width(value):.2f}" '
            f'marker-end="url(#arrow)"><title>{html.escape(source)} -&gt; '
            f"{html.escape(target)}: utility {value:.2f}</title></path>"
        )
    for node in graph.nodes:
        x, y = positions[node.id]
        value = node_u.get(node.id, 0.0)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node_radius(value):.1f}" fill="#4a7bd0" '
            f'fill-opacity="0.85" stroke="#1d3d7a"><title>{html.escape(node.id)}: utility '
            f"{value:.2f}</title></circle>"
            f'<text x="{x:.1f}" y="{y + node_radius(value) + 14:.1f}" text-anchor="middle">'
            f"{html.escape(node.id)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def write_graph_png(graph: AgentGraph, utility: Mapping[str, Any], path: Path) -> None:
    """The same picture as graph_svg, drawn by matplotlib into a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.patches import Circle, FancyArrowPatch

    positions = layout(graph)
    node_u, edge_u = utilities(utility)
    figure = pyplot.figure(figsize=(WIDTH / 100, HEIGHT / 100), dpi=100)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, WIDTH)
    axes.set_ylim(HEIGHT, 0)
    axes.axis("off")
    for source, target in sorted(graph.edge_pairs()):
        start, end = _edge_ends(positions[source], positions[target], _gap(node_u, source, target))
        width = edge_width(edge_u.get((source, target), 0.0))
        axes.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                connectionstyle=f"arc3,rad={-BEND}",
                mutation_scale=12,
                lw=width * 0.75,
                color="#555",
                alpha=0.6,
            )
        )
    for node in graph.nodes:
        x, y = positions[node.id]
        radius = node_radius(node_u.get(node.id, 0.0))
        axes.add_patch(Circle((x, y), radius, facecolor="#4a7bd0", edgecolor="#1d3d7a", alpha=0.85))
        axes.text(x, y + radius + 12, node.id, ha="center", va="center", fontsize=9)
    figure.savefig(path, format="png")
    pyplot.close(figure)


def _cell(value: Any) -> str:
    """A table cell: numbers to 3 decimals, None as 'n/a', everything else as text."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value))


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain HTML table."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _metric_rows(replay: Mapping[str, Any], variant: Mapping[str, Any]) -> list[list[Any]]:
    """One row per metric: its replay and its variant value."""
    return [[key, replay.get(key), variant.get(key)] for key in dict.fromkeys([*replay, *variant])]


def _run_summary(metrics: Mapping[str, Any]) -> str:
    """How many runs, with which seeds and settings."""
    manifest = metrics.get("manifest", {})
    counts = metrics["counts"]
    return (
        f"<p>Run <code>{html.escape(metrics['run_id'])}</code>: {counts['scenarios']} "
        f"scenarios, {manifest.get('replays')} exact replays and {manifest.get('variants')} "
        f"variants each = {counts['conversations']} conversations ({counts['attempts']} "
        f"attempts with up to {manifest.get('max_restarts')} restarts, {counts['turns']} agent "
        f"turns). Seed {manifest.get('seed')}; the agent's per-conversation seeds derive from "
        f"it. Agent <code>{html.escape(str(manifest.get('agent', '')))}</code>, user simulator "
        f"<code>{html.escape(str(manifest.get('user_simulator', '')))}</code>.</p>"
    )


def render_html(metrics: Mapping[str, Any], svg: str) -> str:
    """The whole report page (no external resources)."""
    structure, conv, utility = metrics["structure"], metrics["convergence"], metrics["utility"]
    judged = "response_consistency_judged" in metrics["replay"]
    sections = [
        "<h1>EDGE report</h1>",
        _run_summary(metrics),
        "<h2>Determinism (mean over scenarios)</h2>",
        html_table(
            ["metric", "exact replays", "variants"],
            _metric_rows(metrics["replay"], metrics["variant"]),
        ),
        "<p>Response consistency judged (1-4): "
        + ("reported above." if judged else "not judged (no judge configured).")
        + "</p>",
        "<h2>Structure and convergence</h2>",
        html_table(
            ["structural adherence", "transitions", "convergence rate", "completion rate"],
            [
                [
                    structure["structural_adherence"],
                    structure["transitions"],
                    conv["convergence_rate"],
                    conv["completion_rate"],
                ]
            ],
        ),
        html_table(
            ["off-graph from", "to", "count"],
            [[r["from"], r["to"], r["count"]] for r in structure["off_graph_transitions"]],
        ),
        "<h2>Graph (node size and edge width: utility)</h2>",
        svg,
        "<h2>Node utility</h2>",
        html_table(
            ["node", "queries", "visits", "utility", "failures"],
            [
                [r["node"], r["queries"], r["visits"], r["utility"], r["failures"]]
                for r in utility["nodes"]
            ],
        ),
        "<h2>Edge utility</h2>",
        html_table(
            ["from", "to", "queries", "traversals", "utility", "failures"],
            [
                [r["from"], r["to"], r["queries"], r["traversals"], r["utility"], r["failures"]]
                for r in utility["edges"]
                if r["queries"] or r["failures"]
            ],
        ),
        "<h2>Scenarios</h2>",
        html_table(
            [
                "scenario",
                "path",
                "node consistency (replays)",
                "node consistency (variants)",
                "lexical response consistency",
            ],
            [
                [
                    s["scenario"],
                    " > ".join(s["path"]),
                    s["replay"]["node_trajectory_consistency"],
                    s["variant"].get("node_trajectory_consistency"),
                    s["replay"]["response_consistency_lexical"],
                ]
                for s in metrics["scenarios"]
            ],
        ),
    ]
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:980px}"
        "table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#eee}"
    )
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>EDGE report '
        f"{html.escape(metrics['run_id'])}</title><style>{style}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


def write_report(metrics: Mapping[str, Any], graph: AgentGraph, out: Path) -> list[Path]:
    """Write `out` (HTML) and the graph beside it as `.svg` and `.png`; returns the paths."""
    svg = graph_svg(graph, metrics["utility"])
    svg_path, png_path = out.with_suffix(".svg"), out.with_suffix(".png")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(metrics, svg), encoding="utf-8")
    svg_path.write_text(svg, encoding="utf-8")
    write_graph_png(graph, metrics["utility"], png_path)
    return [out, svg_path, png_path]
