"""EDGE simulation: a simulated user drives the agent along each scenario's intended path.

Per scenario: R exact replays (variant id `base`, the same user turns every time) and V
variants (another persona and a paraphrased wording). Each user message asks for the next
node of the intended path. After every agent turn the nodes the agent reported are checked
against the path; when they leave it, the conversation restarts from the beginning (a new
conversation, the same user turns) up to `max_restarts` times. The agent's own spans carry
the run, scenario, replay and variant ids plus `pathgrade.edge.attempt` / `.turn`.
See docs/edge.md ("Simulation").
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from opentelemetry.trace import Tracer
from pathgrade.batch_plane.agents.adapters import AdapterError, AgentAdapter, TurnContext
from pathgrade.batch_plane.edge.determinism import completed, converged
from pathgrade.batch_plane.edge.graph import Scenario
from pathgrade.batch_plane.edge.simulation_config import SimulationConfig
from pathgrade.schemas.agent_graph import AgentGraph
from pathgrade.schemas.genai import MANIFEST_ATTRIBUTE, MANIFEST_SPAN, PG_RUN_ID
from pathgrade.schemas.model import EvalContext
from pydantic import BaseModel, Field

BASE_VARIANT = "base"
PG_EDGE_ATTEMPT = "pathgrade.edge.attempt"
PG_EDGE_TURN = "pathgrade.edge.turn"
PERSONAS = ("plain", "chit-chat", "terse", "rude")
VARIANT_PERSONAS = PERSONAS[1:]  # variant j uses VARIANT_PERSONAS[j % 3]
EXTRA_TURNS = 2  # turns allowed beyond the path length before an attempt counts as stuck

# Scripted wordings per persona; the intent text stays verbatim in every one of them.
_TEMPLATES: dict[str, tuple[str, ...]] = {
    "plain": ("I would like to {intent}.", "Could you help me {intent}?"),
    "chit-chat": (
        "Hi there, lovely weather today! Anyway, I would like to {intent}. Thanks so much!",
        "Hello! My cousin said you are great. Could I {intent}, if it's no trouble?",
    ),
    "terse": ("{intent}.", "{intent}. now."),
    "rude": ("Ugh, just {intent} already. Hurry up.", "Stop wasting my time and {intent}."),
}
_PERSONA_PROMPTS = {
    "plain": "a polite, clear customer",
    "chit-chat": "a chatty customer who adds small talk around every request",
    "terse": "a terse customer who writes as few words as possible",
    "rude": "an impatient, rude customer",
}
Message = dict[str, str]


@dataclass(frozen=True)
class Variant:
    """One way of playing a scenario: the persona, paraphrasing and the replay index."""

    id: str
    persona: str = "plain"
    paraphrase: bool = False
    replay_index: int | None = None


@dataclass(frozen=True)
class UserRequest:
    """What the simulated user is asked to write next."""

    scenario: Scenario
    intent: str  # the intent of the node the message should lead to
    transcript: Sequence[Message]  # the conversation so far ({"role", "content"})
    variant: Variant
    seed: int


class UserSimulator(Protocol):
    """Writes the next user message of a conversation."""

    def message(self, request: UserRequest) -> str: ...


class ScriptedUser:
    """Templated user turns, no model: the intent in a persona's wording (seeded choice)."""

    def message(self, request: UserRequest) -> str:
        templates = _TEMPLATES[request.variant.persona]
        choice = random.Random(request.seed).randrange(len(templates))
        template = templates[choice if request.variant.paraphrase else 0]
        return template.format(intent=request.intent)


class OpenAIUser:
    """A user simulated by a chat model at an OpenAI-compatible endpoint (`/chat/completions`)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        temperature: float = 0.7,
        api_key: str | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.temperature = temperature
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(timeout=60.0, headers=headers)

    def prompt(self, request: UserRequest) -> list[Message]:
        """The chat messages asking the model for the user's next message."""
        wording = (
            "Say it in your own words; do not copy the goal's wording."
            if request.variant.paraphrase
            else "State the goal plainly."
        )
        system = (
            f"You play {_PERSONA_PROMPTS[request.variant.persona]} talking to an assistant. "
            f"Your goal for your next message: {request.intent}. {wording} "
            "Reply with the user's next message only."
        )
        swapped = {"user": "assistant", "assistant": "user"}
        history = [
            {"role": swapped[m["role"]], "content": m["content"]} for m in request.transcript
        ]
        return [{"role": "system", "content": system}, *history]

    def message(self, request: UserRequest) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.prompt(request),
            "temperature": self.temperature,
            "seed": request.seed,
        }
        try:
            reply = self.client.post(self.url, json=body)
            reply.raise_for_status()
            content = reply.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            raise AdapterError(f"user simulator at {self.url}: {error}") from error
        if not isinstance(content, str) or not content.strip():
            raise AdapterError(f"user simulator at {self.url}: no message text in its answer")
        return content.strip()


@dataclass
class ConversationResult:
    """One replay or variant of a scenario: the nodes of every attempt and the outcome."""

    scenario_id: str
    variant: Variant
    expected_nodes: list[str]
    attempts: list[list[str]] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """All attempts' nodes, in order (restarts included)."""
        return [node for attempt in self.attempts for node in attempt]

    @property
    def converged(self) -> bool:
        """Followed its path with no restart (the report's convergence rate counts these)."""
        return converged(self.nodes, self.expected_nodes)

    @property
    def completed(self) -> bool:
        """Completed its path, restarts allowed (the report's completion rate)."""
        return completed(self.nodes, self.expected_nodes)


def plan_variants(replays: int, variants: int) -> list[Variant]:
    """R exact replays followed by V paraphrased variants cycling through the personas."""
    base = [Variant(BASE_VARIANT, replay_index=index) for index in range(replays)]
    others = [
        Variant(f"v{j + 1}-{VARIANT_PERSONAS[j % 3]}", VARIANT_PERSONAS[j % 3], paraphrase=True)
        for j in range(variants)
    ]
    return base + others


def derive_seed(*parts: object) -> int:
    """A stable 63-bit seed from `parts` (same parts, same seed, on every machine)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def next_target(expected: Sequence[str], visited: Sequence[str]) -> str:
    """The node the next user message asks for: the path's next node, past the start."""
    if len(expected) == 1:
        return expected[0]
    return expected[min(max(len(visited), 1), len(expected) - 1)]


class Simulation:
    """Runs scenarios against an adapter with a user simulator (one job: the conversations)."""

    def __init__(
        self,
        graph: AgentGraph,
        adapter: AgentAdapter,
        user: UserSimulator,
        config: SimulationConfig,
    ) -> None:
        self.intents = {node.id: node.intent or node.id for node in graph.nodes}
        self.adapter = adapter
        self.user = user
        self.config = config
        self._messages: dict[tuple[str, str, int, str], str] = {}  # the same user turns

    def run(
        self,
        scenarios: Sequence[Scenario],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[ConversationResult]:
        """Every scenario under every planned variant; `progress(done, total)` after each."""
        plan = plan_variants(self.config.replays, self.config.variants)
        total = len(scenarios) * len(plan)
        results = []
        for scenario in scenarios:
            for variant in plan:
                results.append(self.conversation(scenario, variant))
                if progress is not None:
                    progress(len(results), total)
        return results

    def conversation(self, scenario: Scenario, variant: Variant) -> ConversationResult:
        """One replay or variant, restarted on deviation up to `max_restarts` times."""
        result = ConversationResult(scenario.id, variant, scenario.expected_nodes)
        for attempt in range(self.config.max_restarts + 1):
            visited = self._attempt(scenario, variant, attempt, result)
            result.attempts.append(visited)
            if converged(visited, scenario.expected_nodes):
                break
        return result

    def _attempt(
        self, scenario: Scenario, variant: Variant, attempt: int, result: ConversationResult
    ) -> list[str]:
        """One conversation from the beginning; returns the nodes the agent visited."""
        expected = scenario.expected_nodes
        cfg = self.config
        agent_seed = derive_seed(cfg.seed, scenario.id, variant.id, variant.replay_index, attempt)
        state: dict[str, Any] = {
            "conversation_id": f"{cfg.run_id}:{scenario.id}:{variant.id}:"
            f"{variant.replay_index}:{attempt}",
            "seed": agent_seed,
        }
        visited: list[str] = []
        transcript: list[Message] = []
        for turn in range(len(expected) + EXTRA_TURNS):
            text = self._user_message(
                scenario, variant, turn, next_target(expected, visited), transcript
            )
            reply = self.adapter.respond(
                state, text, self._context(scenario, variant, attempt, turn)
            )
            state = reply.state or state
            visited += reply.nodes
            transcript += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": reply.response},
            ]
            result.responses.append(reply.response)
            if visited != expected[: len(visited)] or visited == expected or reply.done:
                break
        return visited

    def _user_message(
        self,
        scenario: Scenario,
        variant: Variant,
        turn: int,
        target: str,
        transcript: Sequence[Message],
    ) -> str:
        """The user's message for this turn, written once and reused by replays and restarts."""
        key = (scenario.id, variant.id, turn, target)
        if key not in self._messages:
            request = UserRequest(
                scenario=scenario,
                intent=self.intents[target],
                transcript=list(transcript),
                variant=variant,
                seed=derive_seed(self.config.seed, *key),
            )
            self._messages[key] = self.user.message(request)
        return self._messages[key]

    def _context(
        self, scenario: Scenario, variant: Variant, attempt: int, turn: int
    ) -> TurnContext:
        """The evaluation context the agent's root span of this turn carries."""
        return TurnContext(
            EvalContext(
                dataset_item_id=scenario.id,
                run_id=self.config.run_id,
                replay_index=variant.replay_index,
                variant_id=variant.id,
                suite_version=self.config.suite_version,
            ),
            extra={PG_EDGE_ATTEMPT: attempt, PG_EDGE_TURN: turn},
        )


class RunManifest(BaseModel):
    """What an EDGE run set out to do: the graph, the scenarios and how they were played."""

    run_id: str
    graph: dict[str, Any]
    scenarios: list[Scenario]
    replays: int
    variants: int
    max_restarts: int
    seed: int
    agent: str = ""
    user_simulator: str = "scripted"
    personas: list[str] = Field(default_factory=lambda: list(PERSONAS))


def emit_manifest(tracer: Tracer, manifest: RunManifest) -> None:
    """Record the manifest as one `pathgrade.edge.run` span, so the store holds the whole run."""
    attributes = {PG_RUN_ID: manifest.run_id, MANIFEST_ATTRIBUTE: manifest.model_dump_json()}
    with tracer.start_as_current_span(MANIFEST_SPAN, attributes=attributes):
        pass
