"""The file reports of `edge report` / `edge traffic` draw the hand-offs as the run page does:
in the SVG (inline in the HTML, with a Hand-offs table) and in the PNG."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.colors import to_rgba
from matplotlib.image import imread
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch
from pathgrade.batch_plane.edge.handoffs import handoff_counts, turn_handoffs
from pathgrade.batch_plane.edge.report import (
    AGENT_RADIUS,
    HANDOFF_STYLE,
    PLAIN_EDGE,
    _bend,
    _edge_ends,
    _gap,
    graph_figure,
    layout,
    utilities,
    write_traffic_report,
)
from pathgrade.batch_plane.edge.traffic import traffic_metrics

from tests.unit.batch_plane.edge.test_edge_handoffs import GRAPH, _edges, triage_turn

ONCE = {"queries": 1, "utility": 1.0, "failures": 0}
FULL = {  # every node and edge at utility 1: the widest strokes, easy to find in the PNG
    "conversations": 1,
    "nodes": [{"node": node.id, "visits": 1, **ONCE} for node in GRAPH.nodes],
    "edges": [{"from": s, "to": t, "traversals": 1, **ONCE} for s, t in GRAPH.edge_pairs()],
}


def _written(tmp_path: Path, metrics: dict) -> tuple[str, str, Path]:
    """write_traffic_report's HTML, SVG and PNG path for one graph."""
    html, svg, png = write_traffic_report([("desk", metrics, GRAPH)], "span", tmp_path / "r.html")
    return html.read_text(), svg.read_text(), png


def _patches(figure) -> dict[str, object]:
    """gid -> patch or line of the figure's one axes."""
    (axes,) = figure.axes
    return {artist.get_gid(): artist for artist in [*axes.patches, *axes.lines]}


def _midpoint_colour(png: Path, source: str, target: str) -> tuple[float, float, float]:
    """The PNG's colour at the middle of the curve drawn from `source` to `target`."""
    node_u, _ = utilities(FULL)
    positions = layout(GRAPH)
    start, end = _edge_ends(positions[source], positions[target], _gap(node_u, source, target))
    control = _bend(start, end)
    x, y = (0.25 * start[i] + 0.5 * control[i] + 0.25 * end[i] for i in (0, 1))
    return tuple(imread(png)[round(y), round(x), :3])


def _over_white(colour: str) -> tuple[float, float, float]:
    """`colour` at the edges' opacity (0.6) over the white page."""
    return tuple(0.6 * c + 0.4 for c in to_rgba(colour)[:3])


def test_the_written_svg_and_html_hold_the_handoff_edges_by_kind(tmp_path: Path) -> None:
    metrics = traffic_metrics(GRAPH, [triage_turn()])
    assert metrics["handoffs"] == handoff_counts([turn_handoffs(triage_turn())])
    html, svg, _ = _written(tmp_path, metrics)
    assert svg in html  # the same picture, inline
    assert _edges(svg) == {
        "triage -&gt; billing": ("edge handoff", "transfer"),
        "triage -&gt; lookup": ("edge handoff", "delegation"),
        "lookup -&gt; billing": ("edge", ""),
    }
    assert re.findall(r"hand-off: ([^<]+)<", svg) == [
        "transfer of control", "delegation (sub-agent call)"
    ]  # fmt: skip
    table = html[html.index("<h3>Hand-offs") :]
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\w+)</td><td>(\w+)</td><td>(\d+)</td>", table)
    assert rows == [("triage", "lookup", "delegation", "1"), ("triage", "billing", "transfer", "1")]
    assert "c1" not in html  # names and counts only: no tool argument


def test_the_png_draws_each_handoff_in_its_kinds_colour_and_dash() -> None:
    handoffs = handoff_counts([turn_handoffs(triage_turn())])
    drawn = _patches(graph_figure(GRAPH, FULL, handoffs))
    transfer, delegation, plain = (
        drawn[edge] for edge in ("triage -> billing", "triage -> lookup", "lookup -> billing")
    )
    assert isinstance(transfer, FancyArrowPatch)
    assert transfer.get_edgecolor() == to_rgba(HANDOFF_STYLE["transfer"][0], 0.6)
    assert delegation.get_edgecolor() == to_rgba(HANDOFF_STYLE["delegation"][0], 0.6)
    assert plain.get_edgecolor() == to_rgba(PLAIN_EDGE, 0.6)
    assert transfer.get_linestyle() == plain.get_linestyle() == "solid"
    assert delegation.get_linestyle() != "solid"  # dashed, as the SVG's stroke-dasharray
    legend = [drawn[f"legend {kind}"] for kind in ("transfer", "delegation")]
    assert all(isinstance(line, Line2D) for line in legend)
    assert [line.get_color() for line in legend] == [
        HANDOFF_STYLE["transfer"][0], HANDOFF_STYLE["delegation"][0]
    ]  # fmt: skip


def test_the_png_adds_the_orchestrator_outside_the_graph_as_a_hollow_node() -> None:
    handoffs = [
        {"from": "router", "to": node, "kind": "delegation", "handoffs": 2, "turns": 2}
        for node in ("triage", "billing")
    ]
    drawn = _patches(graph_figure(GRAPH, {}, handoffs))
    router = drawn["router"]
    assert isinstance(router, Circle) and router.get_radius() == AGENT_RADIUS
    assert router.get_facecolor() == to_rgba("#fff")
    for node in ("triage", "billing"):
        assert drawn[f"router -> {node}"].get_edgecolor() == to_rgba(
            HANDOFF_STYLE["delegation"][0], 0.6
        )
    assert "legend transfer" not in drawn and "legend delegation" in drawn


def test_the_written_png_shows_a_transfer_red_where_the_plain_run_shows_grey(
    tmp_path: Path,
) -> None:
    with_handoffs = traffic_metrics(GRAPH, [triage_turn()])
    with_handoffs["utility"] = FULL
    *_, png = _written(tmp_path / "handoffs", with_handoffs)
    colour = _midpoint_colour(png, "triage", "billing")
    assert colour == pytest.approx(_over_white(HANDOFF_STYLE["transfer"][0]), abs=0.04)
    plain = {**with_handoffs, "handoffs": []}
    *_, png = _written(tmp_path / "plain", plain)
    assert _midpoint_colour(png, "triage", "billing") == pytest.approx(
        _over_white(PLAIN_EDGE), abs=0.04
    )


def test_a_report_without_handoffs_is_unchanged(tmp_path: Path) -> None:
    metrics = {**traffic_metrics(GRAPH, [triage_turn()]), "handoffs": []}
    html, svg, _ = _written(tmp_path, metrics)
    assert "handoff" not in svg and "node agent" not in svg and "Hand-offs" not in html
    assert set(_edges(svg).values()) == {("edge", "")}
    drawn = _patches(graph_figure(GRAPH, FULL))
    assert {gid for gid, a in drawn.items() if isinstance(a, Circle)} == {
        node.id for node in GRAPH.nodes
    }
    edges = [a for a in drawn.values() if isinstance(a, FancyArrowPatch)]
    assert len(edges) == len(GRAPH.edge_pairs())
    assert {edge.get_edgecolor() for edge in edges} == {to_rgba(PLAIN_EDGE, 0.6)}
    assert not any(isinstance(a, Line2D) for a in drawn.values())  # no legend
