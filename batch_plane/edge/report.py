"""EDGE report: one self-contained HTML page (tables + the graph as inline SVG), and the
graph as standalone SVG and PNG files. A report holds one or several runs (the paper's
Table 3 side by side first), or live traffic over one or several declared graphs.

Nodes sit on an ellipse, the start at the left; node radius and edge width grow with
utility (the share of conversations that visited the node / used the edge); the hand-offs
between agents are marked on it (`handoff_drawing`). The SVG is written by hand; the PNG is
drawn by matplotlib from the same layout, sizes, hand-off styles and legend.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathgrade.schemas.agent_graph import AgentGraph

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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


def _counts(rows: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any]) -> dict:
    """Utility rows by `key`."""
    return {key(row): row for row in rows}


def graph_svg(
    graph: AgentGraph,
    utility: Mapping[str, Any],
    node_href: Callable[[str], str] | None = None,
    handoffs: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The graph as an SVG document, node size and edge width proportional to utility; each
    node and edge titled with its counts (queries, visits or traversals, failures) and
    carrying them as `data-*` attributes. With `node_href`, each node links there.

    `handoffs` (`batch_plane.edge.handoffs.handoff_counts` rows) mark the graph edges that
    are hand-offs between agents (class `handoff`, `data-handoff` = their kinds) and add
    those the graph lacks (a sub-agent call from the agent around the graph), with any agent
    that is no graph node drawn as a hollow `agent` node in the middle."""
    positions = layout(graph)
    node_u, edge_u = utilities(utility)
    node_rows = _counts(utility.get("nodes", []), lambda row: row["node"])
    edge_rows = _counts(utility.get("edges", []), lambda row: (row["from"], row["to"]))
    marks = handoff_drawing(graph, positions, node_u, handoffs)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="4" '
        'markerHeight="4" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
        'fill="#555"/></marker></defs>',
    ]
    graph_edges = sorted(graph.edge_pairs())
    for source, target in graph_edges:
        value = edge_u.get((source, target), 0.0)
        row = edge_rows.get((source, target), {})
        counts = (
            f"{row.get('queries', 0)} queries, {row.get('traversals', 0)} traversals, "
            f"{row.get('failures', 0)} failures"
        )
        parts.append(
            _edge_path(
                (positions[source], positions[target]),
                _gap(node_u, source, target),
                (source, target),
                edge_width(value),
                f"utility {value:.2f}: {counts}",
                marks.kinds.get((source, target), {}),
            )
        )
    for extra in marks.extra:
        parts.append(
            _edge_path(
                extra.centres,
                extra.gap,
                extra.names,
                HANDOFF_STROKE,
                "not a graph edge",
                marks.kinds[extra.names],
            )
        )
    for node in graph.nodes:
        x, y = positions[node.id]
        value = node_u.get(node.id, 0.0)
        row = node_rows.get(node.id, {})
        counts = (
            f"{row.get('queries', 0)} queries, {row.get('visits', 0)} visits, "
            f"{row.get('failures', 0)} failures"
        )
        shape = (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node_radius(value):.1f}" fill="#4a7bd0" '
            f'fill-opacity="0.85" stroke="#1d3d7a" class="node" data-node="'
            f'{html.escape(node.id)}" data-counts="utility {value:.2f}: {counts}">'
            f"<title>{html.escape(node.id)}: utility {value:.2f} ({counts})</title></circle>"
            f'<text x="{x:.1f}" y="{y + node_radius(value) + 14:.1f}" text-anchor="middle">'
            f"{html.escape(node.id)}</text>"
        )
        if node_href is not None:
            shape = f'<a href="{html.escape(node_href(node.id))}">{shape}</a>'
        parts.append(shape)
    for agent, (x, y) in marks.agents.items():
        name = html.escape(agent)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{AGENT_RADIUS:.1f}" fill="#fff" '
            f'stroke="#1d3d7a" stroke-width="2" class="node agent" data-node="{name}" '
            f'data-counts="an agent that hands off, not a graph node">'
            f"<title>{name}: an agent that hands off, not a graph node</title></circle>"
            f'<text x="{x:.1f}" y="{y + AGENT_RADIUS + 14:.1f}" text-anchor="middle">{name}</text>'
        )
    if marks.kinds:
        parts.append(_handoff_legend(marks.legend()))
    parts.append("</svg>")
    return "\n".join(parts)


AGENT_RADIUS = 14.0
HANDOFF_STROKE = 2.0
PLAIN_EDGE = "#555"
HANDOFF_STYLE: dict[str, tuple[str, tuple[float, ...]]] = {  # stroke colour and dash pattern
    "transfer": ("#c0392b", ()),
    "delegation": ("#8e44ad", (6.0, 4.0)),
}
HANDOFF_LEGEND = {"transfer": "transfer of control", "delegation": "delegation (sub-agent call)"}
LEGEND_ROW, LEGEND_LINE = 18, 28


@dataclass(frozen=True)
class ExtraEdge:
    """A hand-off that is no graph edge: its agents, their centres and radii."""

    names: tuple[str, str]
    centres: tuple[Point, Point]
    gap: tuple[float, float]


@dataclass(frozen=True)
class HandoffDrawing:
    """What both pictures draw of the hand-offs: the kinds (with counts) per (from, to), the
    agents that are no graph node (hollow, in the middle) and the hand-offs the graph lacks."""

    kinds: dict[tuple[str, str], dict[str, int]]
    agents: dict[str, Point]
    extra: list[ExtraEdge]

    def legend(self) -> list[str]:
        """The kinds drawn, in legend order (transfer first)."""
        return sorted({kind for seen in self.kinds.values() for kind in seen}, reverse=True)


def handoff_drawing(
    graph: AgentGraph,
    positions: Mapping[str, Point],
    node_u: Mapping[str, float],
    handoffs: Sequence[Mapping[str, Any]],
) -> HandoffDrawing:
    """The hand-offs (`handoff_counts` rows) laid out over the graph's `positions`."""
    kinds = _handoff_kinds(handoffs)
    agents = _agent_positions(graph, handoffs)
    everywhere = {**positions, **agents}
    graph_edges = graph.edge_pairs()

    def radius(name: str) -> float:
        return AGENT_RADIUS if name in agents else node_radius(node_u.get(name, 0.0))

    extra = [
        ExtraEdge((s, t), (everywhere[s], everywhere[t]), (radius(s), radius(t)))
        for s, t in kinds
        if (s, t) not in graph_edges and s in everywhere and t in everywhere
    ]
    return HandoffDrawing(kinds, agents, extra)


def edge_style(handoffs: Mapping[str, int]) -> tuple[str, tuple[float, ...]]:
    """An edge's stroke colour and dash: plain grey, else its hand-off kind's (a transfer's
    when it is both)."""
    return HANDOFF_STYLE[sorted(handoffs)[-1]] if handoffs else (PLAIN_EDGE, ())


def _svg_dash(dash: tuple[float, ...]) -> str:
    return f' stroke-dasharray="{" ".join(f"{d:g}" for d in dash)}"' if dash else ""


def _handoff_legend(kinds: Sequence[str]) -> str:
    """The legend of the hand-off kinds drawn, bottom left."""
    rows = []
    for row, kind in enumerate(kinds):
        stroke, dash = HANDOFF_STYLE[kind]
        rows.append(
            f'<line x1="0" y1="{LEGEND_ROW * row}" x2="{LEGEND_LINE}" y2="{LEGEND_ROW * row}" '
            f'stroke="{stroke}" stroke-width="2"{_svg_dash(dash)}/><text x="{LEGEND_LINE + 6}" '
            f'y="{LEGEND_ROW * row + 4}">hand-off: {HANDOFF_LEGEND[kind]}</text>'
        )
    top = _legend_top(kinds)
    return f'<g class="handoff-legend" transform="translate(10,{top})">{"".join(rows)}</g>'


def _legend_top(kinds: Sequence[str]) -> int:
    """The y of the legend's first row."""
    return HEIGHT - 16 - LEGEND_ROW * len(kinds)


def _handoff_kinds(handoffs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (from, to): how many hand-offs of each kind."""
    kinds: dict[tuple[str, str], dict[str, int]] = {}
    for row in handoffs:
        seen = kinds.setdefault((row["from"], row["to"]), {})
        seen[row["kind"]] = seen.get(row["kind"], 0) + row["handoffs"]
    return kinds


def _agent_positions(graph: AgentGraph, handoffs: Sequence[Mapping[str, Any]]) -> dict[str, Point]:
    """Where the hand-offs' agents that are no graph node go: a column in the middle."""
    nodes = {node.id for node in graph.nodes}
    extra = [a for row in handoffs for a in (row["from"], row["to"]) if a not in nodes]
    agents = list(dict.fromkeys(extra))
    step = 2 * AGENT_RADIUS + 30
    return {
        agent: (WIDTH / 2, HEIGHT / 2 + (index - (len(agents) - 1) / 2) * step)
        for index, agent in enumerate(agents)
    }


def _edge_path(
    ends: tuple[Point, Point],
    gap: tuple[float, float],
    names: tuple[str, str],
    width: float,
    counts: str,
    handoffs: Mapping[str, int],
) -> str:
    """One edge as a curved path with its arrow, title and `data-*` counts; a hand-off edge
    is drawn in its kind's colour and dash (a transfer's when it is both)."""
    (x1, y1), (x2, y2) = start, end = _edge_ends(ends[0], ends[1], gap)
    cx, cy = _bend(start, end)
    label = f"{html.escape(names[0])} -&gt; {html.escape(names[1])}"
    stroke, dash = edge_style(handoffs)
    marks = ""
    if handoffs:
        shown = ", ".join(f"{n} {kind}" for kind, n in sorted(handoffs.items()))
        counts = f"{counts}; hand-offs: {shown}"
        marks = f' data-handoff="{" ".join(sorted(handoffs))}"'
    return (
        f'<path d="M{x1:.1f},{y1:.1f} Q{cx:.1f},{cy:.1f} {x2:.1f},{y2:.1f}" fill="none" '
        f'stroke="{stroke}" stroke-opacity="0.6" stroke-width="{width:.2f}"{_svg_dash(dash)} '
        f'marker-end="url(#arrow)" class="edge{" handoff" if handoffs else ""}"{marks} '
        f'data-edge="{label}" data-counts="{counts}"><title>{label}: {counts}</title></path>'
    )


def graph_figure(
    graph: AgentGraph, utility: Mapping[str, Any], handoffs: Sequence[Mapping[str, Any]] = ()
) -> Figure:
    """The same picture as graph_svg (hand-offs, hollow agents and legend included) as a
    matplotlib figure; every edge patch has the gid "from -> to"."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle

    positions = layout(graph)
    node_u, edge_u = utilities(utility)
    marks = handoff_drawing(graph, positions, node_u, handoffs)
    figure = Figure(figsize=(WIDTH / 100, HEIGHT / 100), dpi=100)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, WIDTH)
    axes.set_ylim(HEIGHT, 0)
    axes.axis("off")
    for source, target in sorted(graph.edge_pairs()):
        width = edge_width(edge_u.get((source, target), 0.0))
        centres = (positions[source], positions[target])
        seen = marks.kinds.get((source, target), {})
        _png_edge(axes, (source, target), centres, _gap(node_u, source, target), width, seen)
    for extra in marks.extra:
        seen = marks.kinds[extra.names]
        _png_edge(axes, extra.names, extra.centres, extra.gap, HANDOFF_STROKE, seen)
    for node in graph.nodes:
        x, y = positions[node.id]
        radius = node_radius(node_u.get(node.id, 0.0))
        axes.add_patch(
            Circle(
                (x, y), radius, facecolor="#4a7bd0", edgecolor="#1d3d7a", alpha=0.85, gid=node.id
            )
        )
        axes.text(x, y + radius + 12, node.id, ha="center", va="center", fontsize=9)
    for agent, (x, y) in marks.agents.items():
        axes.add_patch(
            Circle((x, y), AGENT_RADIUS, facecolor="#fff", edgecolor="#1d3d7a", lw=1.5, gid=agent)
        )
        axes.text(x, y + AGENT_RADIUS + 12, agent, ha="center", va="center", fontsize=9)
    _png_legend(axes, marks.legend())
    return figure


def _png_edge(
    axes: Axes,
    names: tuple[str, str],
    centres: tuple[Point, Point],
    gap: tuple[float, float],
    width: float,
    handoffs: Mapping[str, int],
) -> None:
    """One edge as a curved arrow in its hand-off style, like `_edge_path`."""
    from matplotlib.patches import FancyArrowPatch

    colour, dash = edge_style(handoffs)
    start, end = _edge_ends(centres[0], centres[1], gap)
    axes.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            connectionstyle=f"arc3,rad={-BEND}",
            mutation_scale=12,
            lw=width * 0.75,
            linestyle=_png_dash(dash, width * 0.75),
            color=colour,
            alpha=0.6,
            gid=f"{names[0]} -> {names[1]}",
        )
    )


def _png_legend(axes: Axes, kinds: Sequence[str]) -> None:
    """The legend of the hand-off kinds drawn, bottom left, like `_handoff_legend`."""
    top = _legend_top(kinds)
    for row, kind in enumerate(kinds):
        colour, dash = HANDOFF_STYLE[kind]
        y = top + LEGEND_ROW * row
        lw = 2 * 0.75  # the SVG legend's stroke-width 2, as the edges are scaled
        axes.plot([10, 10 + LEGEND_LINE], [y, y], color=colour, lw=lw,
                  linestyle=_png_dash(dash, lw), gid=f"legend {kind}")  # fmt: skip
        axes.text(16 + LEGEND_LINE, y, f"hand-off: {HANDOFF_LEGEND[kind]}", va="center",
                  fontsize=9)  # fmt: skip


PT_PER_PX = 0.72  # matplotlib dash lengths are in points; the figure has 100 px per inch


def _png_dash(dash: tuple[float, ...], lw: float) -> str | tuple[float, tuple[float, ...]]:
    """A matplotlib line style with the SVG's dash lengths in pixels (matplotlib scales
    dashes by the line width `lw`, the SVG does not)."""
    return (0, tuple(d * PT_PER_PX / lw for d in dash)) if dash else "solid"


def write_graph_png(
    graph: AgentGraph,
    utility: Mapping[str, Any],
    path: Path,
    handoffs: Sequence[Mapping[str, Any]] = (),
) -> None:
    """The same picture as graph_svg, drawn by matplotlib into a PNG file."""
    graph_figure(graph, utility, handoffs).savefig(path, format="png")


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


# Table 3 of the EDGE paper: (row label, where the value is, scale to print it in).
TABLE3_ROWS: tuple[tuple[str, str, float], ...] = (
    ("Node Trajectory Consistency (%)", "node_trajectory_consistency", 100.0),
    ("Node Trajectory Coverage (%)", "node_trajectory_coverage", 100.0),
    ("Action Trajectory Consistency (%)", "action_trajectory_consistency", 100.0),
    ("Action Trajectory Coverage (%)", "action_trajectory_coverage", 100.0),
    ("Response Consistency (1-4)", "response_consistency_judged", 1.0),
    ("Average Number of Turns", "avg_turns_per_conversation", 1.0),
)


def run_label(metrics: Mapping[str, Any]) -> str:
    """A run's column title: its id, and its agent when known."""
    agent = metrics.get("manifest", {}).get("agent", "")
    return f"{metrics['run_id']} ({agent})" if agent else str(metrics["run_id"])


def table3(runs: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """EDGE Table 3 for one or several runs side by side: one row per metric, one column per
    run. Determinism values are the means over scenarios of the exact replays; the response
    consistency is the judge's (None when no judge was configured); the average number of
    turns is over all conversations."""
    rows = []
    for label, key, scale in TABLE3_ROWS:
        values = []
        for metrics in runs:
            value = (metrics["utility"] if key.startswith("avg_") else metrics["replay"]).get(key)
            values.append(None if value is None else round(value * scale, 2))
        rows.append([label, *values])
    return rows


def table3_text(runs: Sequence[Mapping[str, Any]]) -> str:
    """Table 3 as aligned text for the terminal."""
    header = ["metric", *(run_label(m) for m in runs)]
    body = [
        [str(row[0]), *("n/a" if v is None else f"{v:.2f}" for v in row[1:])]
        for row in table3(runs)
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [header, ["-" * w for w in widths], *body]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    )


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


def _handoff_table(handoffs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The Hand-offs table (from, to, kind, hand-offs, turns), as on the EDGE run page;
    nothing when there is no hand-off."""
    if not handoffs:
        return []
    return [
        "<h3>Hand-offs (between agents: a transfer passes control, a delegation is a "
        "sub-agent call)</h3>",
        html_table(
            ["from", "to", "kind", "hand-offs", "turns"],
            [[r["from"], r["to"], r["kind"], r["handoffs"], r["turns"]] for r in handoffs],
        ),
    ]


def _utility_sections(metrics: Mapping[str, Any], svg: str) -> list[str]:
    """The graph picture, the node and edge utility tables and the hand-offs."""
    utility = metrics["utility"]
    return [
        "<h3>Graph (node size and edge width: utility)</h3>",
        svg,
        f"<h3>Node utility (over {utility['conversations']} conversations)</h3>",
        html_table(
            ["node", "queries", "visits", "utility", "failures"],
            [
                [r["node"], r["queries"], r["visits"], r["utility"], r["failures"]]
                for r in utility["nodes"]
            ],
        ),
        "<h3>Edge utility</h3>",
        html_table(
            ["from", "to", "queries", "traversals", "utility", "failures"],
            [
                [r["from"], r["to"], r["queries"], r["traversals"], r["utility"], r["failures"]]
                for r in utility["edges"]
                if r["queries"] or r["failures"]
            ],
        ),
        *_handoff_table(metrics["handoffs"]),
    ]


def _structure_table(structure: Mapping[str, Any]) -> str:
    return html_table(
        ["off-graph from", "to", "count"],
        [[r["from"], r["to"], r["count"]] for r in structure["off_graph_transitions"]],
    )


def run_sections(metrics: Mapping[str, Any], svg: str) -> list[str]:
    """One run's part of the report."""
    structure, conv = metrics["structure"], metrics["convergence"]
    judged = metrics["replay"].get("response_consistency_judged")
    return [
        f"<h2>Run {html.escape(str(metrics['run_id']))}</h2>",
        _run_summary(metrics),
        "<h3>Determinism (mean over scenarios)</h3>",
        html_table(
            ["metric", "exact replays", "variants"],
            _metric_rows(metrics["replay"], metrics["variant"]),
        ),
        "<p>Response consistency judged (1-4): "
        + (
            f"{judged:.2f} (exact replays)."
            if judged is not None
            else "not judged (no judge configured)."
        )
        + "</p>",
        "<h3>Structure and convergence</h3>",
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
        _structure_table(structure),
        *_utility_sections(metrics, svg),
        "<h3>Scenarios</h3>",
        html_table(
            [
                "scenario",
                "path",
                "node consistency (replays)",
                "node consistency (variants)",
                "lexical response consistency",
                "judged response consistency",
            ],
            [
                [
                    s["scenario"],
                    " > ".join(s["path"]),
                    s["replay"]["node_trajectory_consistency"],
                    s["variant"].get("node_trajectory_consistency"),
                    s["replay"]["response_consistency_lexical"],
                    s["replay"].get("response_consistency_judged"),
                ]
                for s in metrics["scenarios"]
            ],
        ),
    ]


_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:980px}"
    "table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#eee}"
)


def page(title: str, sections: Sequence[str]) -> str:
    """A whole self-contained HTML page (no external resources)."""
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{_STYLE}</style></head><body>" + "\n".join(sections) + "</body></html>\n"
    )


def render_html(runs: Sequence[tuple[Mapping[str, Any], str]]) -> str:
    """The report of one or several runs ((metrics, graph SVG) each): Table 3 side by side,
    then every run's own sections."""
    metrics = [m for m, _ in runs]
    summary = html_table(["metric", *(run_label(m) for m in metrics)], table3(metrics))
    sections = ["<h1>EDGE report</h1>", "<h2>Summary (the paper's Table 3)</h2>", summary]
    for run, svg in runs:
        sections += run_sections(run, svg)
    return page("EDGE report " + ", ".join(str(m["run_id"]) for m in metrics), sections)


def traffic_sections(label: str, metrics: Mapping[str, Any], svg: str) -> list[str]:
    """One declared graph over live traffic: coverage, adherence, structure, utility."""
    coverage, adherence, structure = metrics["coverage"], metrics["adherence"], metrics["structure"]
    problems = ", ".join(f"{k} {v}" for k, v in adherence["problems"].items()) or "none"
    return [
        f"<h2>{html.escape(label)}</h2>",
        f"<p>{metrics['traces']} traces, {metrics['walks']} walks ({metrics['walk']} walks), "
        f"{metrics['utility']['conversations']} conversations.</p>",
        "<h3>Coverage and adherence</h3>",
        html_table(
            [
                "nodes covered",
                "edges covered",
                "walks checked",
                "walks off the graph",
                "problems (PG118)",
                "structural adherence",
            ],
            [
                [
                    coverage["nodes"],
                    coverage["edges"],
                    adherence["walks_checked"],
                    adherence["walks_off_graph"],
                    problems,
                    structure["structural_adherence"],
                ]
            ],
        ),
        html_table(["unvisited node"], [[node] for node in coverage["unvisited_nodes"]]),
        html_table(
            ["untraversed edge from", "to"],
            [[e["from"], e["to"]] for e in coverage["untraversed_edges"]],
        ),
        _structure_table(structure),
        *_utility_sections(metrics, svg),
    ]


def render_traffic_html(entries: Sequence[tuple[str, Mapping[str, Any], str]], span: str) -> str:
    """The traffic report: per declared graph (label, traffic_metrics, SVG) its sections."""
    sections = ["<h1>EDGE report: live traffic</h1>", f"<p>{html.escape(span)}</p>"]
    for label, metrics, svg in entries:
        sections += traffic_sections(label, metrics, svg)
    return page("EDGE traffic report", sections)


def _write_graph(
    graph: AgentGraph, metrics: Mapping[str, Any], stem: Path
) -> tuple[str, list[Path]]:
    """The graph as SVG text, with `metrics`' utility and hand-offs, written with its PNG
    beside `stem`."""
    utility, handoffs = metrics["utility"], metrics["handoffs"]
    svg = graph_svg(graph, utility, handoffs=handoffs)
    svg_path, png_path = stem.with_suffix(".svg"), stem.with_suffix(".png")
    svg_path.write_text(svg, encoding="utf-8")
    write_graph_png(graph, utility, png_path, handoffs)
    return svg, [svg_path, png_path]


def _stem(out: Path, label: str, several: bool) -> Path:
    """Where one graph's pictures go: beside `out`, named after it (and `label` when the
    report holds several graphs)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return out.with_name(f"{out.stem}-{safe}") if several else out.with_suffix("")


def write_report(runs: Sequence[tuple[Mapping[str, Any], AgentGraph]], out: Path) -> list[Path]:
    """Write `out` (HTML) for one or several runs ((metrics, graph) each) and every run's
    graph beside it as `.svg` and `.png`; returns the paths."""
    out.parent.mkdir(parents=True, exist_ok=True)
    pictures, written = [], []
    for metrics, graph in runs:
        stem = _stem(out, str(metrics["run_id"]), len(runs) > 1)
        svg, paths = _write_graph(graph, metrics, stem)
        pictures.append((metrics, svg))
        written += paths
    out.write_text(render_html(pictures), encoding="utf-8")
    return [out, *written]


def write_traffic_report(
    entries: Sequence[tuple[str, Mapping[str, Any], AgentGraph]], span: str, out: Path
) -> list[Path]:
    """Write the traffic report `out` and each graph's `.svg` and `.png` beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    pictures, written = [], []
    for label, metrics, graph in entries:
        svg, paths = _write_graph(graph, metrics, _stem(out, label, len(entries) > 1))
        pictures.append((label, metrics, svg))
        written += paths
    out.write_text(render_traffic_html(pictures, span), encoding="utf-8")
    return [out, *written]
