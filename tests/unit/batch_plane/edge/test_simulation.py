"""EDGE simulation: user turns, replays and variants, restart on deviation, the manifest."""

from __future__ import annotations

import json
from statistics import fmean
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.agents.adapters import AdapterError, AgentTurn, TurnContext, load_adapter
from pathgrade.batch_plane.edge.determinism import replay_metrics
from pathgrade.batch_plane.edge.graph import Scenario, enumerate_paths, scenarios
from pathgrade.batch_plane.edge.simulation import (
    MANIFEST_ATTRIBUTE,
    PERSONAS,
    OpenAIUser,
    RunManifest,
    ScriptedUser,
    Simulation,
    UserRequest,
    Variant,
    emit_manifest,
    next_target,
    plan_variants,
)
from pathgrade.batch_plane.edge.simulation_config import SimulationConfig
from pathgrade.content.graph_documents import load_graph

from tests.support.openai_standin import OpenAIStandIn, Reply
from tests.support.paths import REPO_ROOT

GRAPH = load_graph(
    {
        "start": "s",
        "terminals": ["t"],
        "nodes": [
            {"id": "s", "intent": "say hello"},
            {"id": "a", "intent": "ask about alpha"},
            {"id": "b", "intent": "ask about beta"},
            {"id": "t", "intent": "finish up"},
        ],
        "edges": [{"from": "s", "to": "a"}, {"from": "s", "to": "b"},
                  {"from": "a", "to": "t"}, {"from": "b", "to": "t"}],
    }
)  # fmt: skip
PATH_A = Scenario(id="p-a", intent="", expected_nodes=["s", "a", "t"], expected_actions=[])
EXAMPLES = REPO_ROOT / "examples" / "recruitment"


class ScriptAgent:
    """Visits the node whose intent the message names; `wrong` attempts go to b instead."""

    def __init__(self, wrong_attempts: int = 0) -> None:
        self.wrong_attempts = wrong_attempts
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def respond(self, state: dict, message: str, context: TurnContext) -> AgentTurn:
        attrs = context.attributes()
        self.calls.append((message, attrs))
        wanted = next(n.id for n in GRAPH.nodes if n.intent in message)
        if attrs["pathgrade.edge.attempt"] < self.wrong_attempts and wanted == "a":
            wanted = "b"
        nodes = ["s", wanted] if not state.get("started") else [wanted]
        return AgentTurn(response=f"at {wanted}", nodes=nodes, state={**state, "started": True})


def config(**kwargs: Any) -> SimulationConfig:
    return SimulationConfig(**{"run_id": "run-1", "replays": 2, "variants": 1, **kwargs})


def test_scripted_user_keeps_the_intent_verbatim_in_every_persona_and_wording() -> None:
    for persona in PERSONAS:
        for seed in range(6):
            request = UserRequest(PATH_A, "ask about alpha", [], Variant("v", persona, True), seed)
            assert "ask about alpha" in ScriptedUser().message(request)
    plain = UserRequest(PATH_A, "ask about alpha", [], Variant("base"), 3)
    assert ScriptedUser().message(plain) == "I would like to ask about alpha."


def test_plan_variants_replays_then_personas() -> None:
    plan = plan_variants(2, 4)
    assert [(v.id, v.replay_index, v.paraphrase) for v in plan[:2]] == [
        ("base", 0, False), ("base", 1, False)]  # fmt: skip
    assert [v.persona for v in plan[2:]] == ["chit-chat", "terse", "rude", "chit-chat"]
    assert len({v.id for v in plan}) == 5


def test_next_target_skips_the_start_and_stays_on_the_path() -> None:
    assert next_target(["s", "a", "t"], []) == "a"
    assert next_target(["s", "a", "t"], ["s", "a"]) == "t"
    assert next_target(["s", "a", "t"], ["s", "a", "t", "x"]) == "t"
    assert next_target(["s"], []) == "s"


def test_a_conversation_follows_the_path_and_carries_the_eval_context() -> None:
    agent = ScriptAgent()
    result = Simulation(GRAPH, agent, ScriptedUser(), config()).conversation(
        PATH_A, Variant("base", replay_index=1)
    )
    assert result.converged and result.completed and result.attempts == [["s", "a", "t"]]
    assert [message for message, _ in agent.calls] == [
        "I would like to ask about alpha.", "I would like to finish up."]  # fmt: skip
    assert agent.calls[1][1] == {
        "pathgrade.run.id": "run-1", "pathgrade.dataset.item_id": "p-a",
        "pathgrade.replay.index": 1, "pathgrade.variant.id": "base",
        "pathgrade.edge.attempt": 0, "pathgrade.edge.turn": 1,
    }  # fmt: skip


def test_a_deviation_restarts_from_the_beginning_with_the_same_user_turns() -> None:
    agent = ScriptAgent(wrong_attempts=1)
    sim = Simulation(GRAPH, agent, ScriptedUser(), config())
    result = sim.conversation(PATH_A, Variant("base", replay_index=0))
    assert result.attempts == [["s", "b"], ["s", "a", "t"]]
    assert result.completed and not result.converged  # the report's two rates, one definition
    assert result.nodes == ["s", "b", "s", "a", "t"]
    assert agent.calls[0][0] == agent.calls[1][0]  # the restart repeats the first user turn


def test_restarts_are_bounded_by_max_restarts() -> None:
    agent = ScriptAgent(wrong_attempts=99)
    result = Simulation(GRAPH, agent, ScriptedUser(), config(max_restarts=2)).conversation(
        PATH_A, Variant("base", replay_index=0)
    )
    assert len(result.attempts) == 3 and not result.completed


def test_run_plays_r_replays_and_v_variants_per_scenario_with_progress() -> None:
    seen: list[tuple[int, int]] = []
    items = scenarios(GRAPH, enumerate_paths(GRAPH))
    results = Simulation(GRAPH, ScriptAgent(), ScriptedUser(), config(replays=3, variants=2)).run(
        items, lambda done, total: seen.append((done, total))
    )
    assert len(results) == 10 and seen[-1] == (10, 10) and seen[0] == (1, 10)
    assert all(result.converged for result in results)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"replays": 0}, "replays"), ({"variants": -1}, "variants"),
     ({"max_restarts": -1}, "max_restarts"), ({"run_id": ""}, "run_id")],
)  # fmt: skip
def test_config_errors_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        config(**kwargs)


def test_openai_user_prompts_persona_and_goal_with_swapped_roles() -> None:
    """Against the local OpenAI stand-in server, as a real endpoint is called."""
    with OpenAIStandIn(answer=lambda request: " yo, jobs? ") as llm:
        user = OpenAIUser(llm.url + "/", "sim-model", temperature=0.3)
        transcript = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        request = UserRequest(PATH_A, "ask about jobs", transcript, Variant("v1", "rude", True), 5)
        assert user.message(request) == "yo, jobs?"
        body = llm.requests[0]
    assert (body["model"], body["temperature"], body["seed"]) == ("sim-model", 0.3, 5)
    assert "rude" in body["messages"][0]["content"]
    assert "ask about jobs" in body["messages"][0]["content"]
    assert "own words" in body["messages"][0]["content"]
    assert [m["role"] for m in body["messages"][1:]] == ["assistant", "user"]


def test_openai_user_errors_name_the_endpoint() -> None:
    with OpenAIStandIn() as llm:
        llm.enqueue(Reply(status=400))
        user = OpenAIUser(llm.url, "m")
        with pytest.raises(AdapterError, match=f"{llm.url}/chat/completions"):
            user.message(UserRequest(PATH_A, "x", [], Variant("base"), 0))


def test_openai_user_says_the_stand_ins_default_script_and_refuses_an_empty_answer() -> None:
    """The stand-in's default script: a reply, a refusal, then no content at all, which
    must not become the user's message (it once became the text "None")."""
    with OpenAIStandIn() as llm:
        user = OpenAIUser(llm.url, "m")
        said = [
            user.message(UserRequest(PATH_A, intent, [], Variant("base"), 0))
            for intent in ("ask about jobs", "apply")
        ]
        assert said == ["Yes, please go on.", "No, that is not what I asked for."]
        with pytest.raises(AdapterError, match="no message text in its answer"):
            user.message(UserRequest(PATH_A, "withdraw", [], Variant("base"), 0))


def test_manifest_span_round_trips() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    manifest = RunManifest(run_id="run-1", graph=GRAPH.to_dsl(), scenarios=[PATH_A],
                           replays=2, variants=1, max_restarts=2, seed=7)  # fmt: skip
    emit_manifest(provider.get_tracer("t"), manifest)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["pathgrade.run.id"] == "run-1"
    assert RunManifest.model_validate_json(span.attributes[MANIFEST_ATTRIBUTE]) == manifest


def _mean_replay_consistency(variant: str, seed: int) -> float:
    graph = load_graph(json.loads((EXAMPLES / f"graph_{variant}.json").read_text()))
    constrained = load_graph(json.loads((EXAMPLES / "graph_constrained.json").read_text()))
    items = scenarios(constrained, enumerate_paths(constrained))
    agent = load_adapter(f"{EXAMPLES / 'agent.py'}:{variant}")
    sim = Simulation(graph, agent, ScriptedUser(), config(replays=4, variants=0, seed=seed))
    runs: dict[str, list[dict]] = {}
    for result in sim.run(items):
        runs.setdefault(result.scenario_id, []).append({"nodes": result.nodes})
    return fmean(replay_metrics(r)["node_trajectory_consistency"] for r in runs.values())


def test_recruitment_example_is_reproducible_and_constrained_is_more_deterministic() -> None:
    for seed in (1, 2, 3):
        constrained = _mean_replay_consistency("constrained", seed)
        assert constrained == _mean_replay_consistency("constrained", seed)
        assert constrained > _mean_replay_consistency("baseline", seed)


def test_car_dealer_langgraph_agent_scripted_converges_and_stochastic_is_reproducible() -> None:
    dealer = EXAMPLES.parent / "car_dealer"
    from pathgrade.content.graph_documents import from_langgraph_json

    graph = from_langgraph_json(json.loads((dealer / "graph.json").read_text()))
    items = scenarios(graph, enumerate_paths(graph))
    assert [s.expected_nodes for s in items][2] == ["greetings", "test_drive"]

    def play(agent: str) -> list[list[str]]:
        adapter = load_adapter(f"{dealer / 'agent.py'}:{agent}")
        sim = Simulation(graph, adapter, ScriptedUser(), config(replays=3, variants=2, seed=4))
        return [result.nodes for result in sim.run(items)]

    assert play("scripted") == [s.expected_nodes for s in items for _ in range(5)]
    stochastic = play("stochastic")
    assert stochastic == play("stochastic")
    assert stochastic != play("scripted")
