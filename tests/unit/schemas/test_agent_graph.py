"""The EDGE graph DSL as a model: what it keeps, what it requires."""

from __future__ import annotations

import pytest
from pathgrade.schemas.agent_graph import AgentGraph
from pydantic import ValidationError


def test_brief_example_loads_and_keeps_extra_fields() -> None:
    data = {
        "start": "a",
        "terminals": ["z"],
        "owner": "team-x",
        "nodes": [{"id": "a", "tools": ["kb"], "intent": "look it up", "model": "m1"}],
        "edges": [{"from": "a", "to": "b", "when": "state.found", "weight": 2}],
    }
    graph = AgentGraph.model_validate(data)
    assert graph.nodes[0].tools == ["kb"]
    assert graph.edges[0].source == "a" and graph.edges[0].target == "b"
    assert graph.edges[0].when == "state.found"
    assert graph.to_dsl() == data


def test_missing_required_field_is_named() -> None:
    with pytest.raises(ValidationError, match="start"):
        AgentGraph.model_validate({"terminals": ["z"], "nodes": []})
