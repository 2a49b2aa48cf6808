"""PG118 at its edges: each problem's sentence, the end node named, a graph file or an
inline graph that is unsound or malformed refused with the reason, a graph already read
kept, and a conversation walk that reports nothing about the earlier turn's own node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pathgrade.content.graph_documents import load_graph
from pathgrade.detectors.graph_adherence import (
    GraphAdherenceParams,
    WalkProblem,
    read_graph_file,
    walk_problems,
)
from pathgrade.detectors.view import DetectorContext
from pathgrade.schemas.turns import TurnDigest
from pydantic import ValidationError

from tests.support.traces import detect
from tests.unit.detectors.test_detectors_graph_adherence import GRAPH, walk

UNSOUND = {**GRAPH, "terminals": ["nowhere"]}  # a terminal that is not a node
MALFORMED = {**GRAPH, "nodes": "greetings"}  # nodes is not a list


def test_each_problem_is_described_in_its_own_sentence() -> None:
    graph = load_graph(GRAPH)
    sentences = {
        kind: WalkProblem(kind, 0, "faq", "test_drive").describe(graph)
        for kind in ("unknown_node", "missing_edge", "wrong_start", "non_terminal_end")
    }
    assert sentences == {
        "unknown_node": "Node 'test_drive' is not in the declared graph.",
        "missing_edge": "Edge 'faq' -> 'test_drive' is not in the declared graph.",
        "wrong_start": "The turn starts at 'test_drive'; the graph starts at 'greetings'.",
        "non_terminal_end": (
            "The turn ends at 'test_drive', not at a terminal ('greetings', 'test_drive', 'faq')."
        ),
    }


def test_a_non_terminal_end_names_the_last_node() -> None:
    to_faq = [*GRAPH["edges"], {"from": "test_drive", "to": "faq"}]
    graph = load_graph({**GRAPH, "terminals": ["faq"], "edges": to_faq})
    (end,) = walk_problems(graph, ["greetings", "test_drive"])
    assert (end.problem, end.index, end.target) == ("non_terminal_end", 1, "test_drive")


@pytest.mark.parametrize("document", [UNSOUND, MALFORMED], ids=["unsound", "malformed"])
def test_a_bad_graph_file_is_refused_naming_the_file(document: dict, tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"graph file '.*graph\.json': "):
        read_graph_file(path)


@pytest.mark.parametrize("document", [UNSOUND, MALFORMED], ids=["unsound", "malformed"])
def test_a_bad_inline_graph_is_refused(document: dict) -> None:
    with pytest.raises(ValidationError, match="graph"):
        GraphAdherenceParams(graph=document)


def test_a_graph_already_read_is_kept() -> None:
    graph = load_graph(GRAPH)
    assert GraphAdherenceParams(graph=graph).graph is graph


def test_a_conversation_walk_says_nothing_of_the_earlier_turn_s_own_node() -> None:
    """The earlier turn's last node is no longer in the graph (it changed since): only
    the step into this turn is this turn's problem, not the node it stepped from."""
    earlier = TurnDigest(
        tenant="t", conversation_id="conv-1", trace_id="e" * 32, top_span_id="e" * 16,
        start_ns=1, graph_nodes=["retired"], succeeded_tools=[], confirmed_actions=[],
    )  # fmt: skip
    context = DetectorContext(history=[earlier])
    params = {"graph": GRAPH, "walk": "conversation"}
    assert detect("PG118", walk("genai", "greetings"), params, context) == []
