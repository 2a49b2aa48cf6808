"""Agent adapters: how pathgrade talks to the agent under test, one user turn at a time.

An adapter answers `respond(conversation_state, user_message, context) -> AgentTurn`, and
`end_state(conversation_state, context)` gives the sandbox's state after the attempt (a
JSON object; None when the agent exposes none), which end-state oracles read.
The agent is the user's own code and emits its own OpenTelemetry spans. pathgrade hands it
the evaluation context (`pathgrade.run.id`, `pathgrade.dataset.item_id`, ...) as OTel
baggage, so the agent's root span can carry it:

- in process (`CallableAdapter`), the baggage is attached to the current OTel context while
  the agent function runs; `EvalContextSpanProcessor` copies it onto every root span, or the
  agent calls `pathgrade_context_attributes()` and sets the attributes itself;
- over HTTP (`HttpAdapter`), the baggage travels in the W3C `baggage` header and the JSON
  body; the agent extracts the header with OTel's propagator and then does the same.

See docs/edge.md ("Agent adapters") for the wire format.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from opentelemetry import baggage, context, propagate
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from pathgrade.content.numbers import parse_index
from pathgrade.schemas import genai
from pathgrade.schemas.model import EvalContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError

PATHGRADE_PREFIX = "pathgrade."
ConversationState = dict[str, Any]


class RetrievedContext(BaseModel):
    """One chunk the agent retrieved: its document id and/or its text."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    text: str = ""


class AgentTurn(BaseModel):
    """What the agent returns for one user turn.

    `response` is its answer; `nodes` the graph nodes it visited during the turn, in order
    (needed to detect a deviation from the intended path; leave empty if unknown); `done`
    says the conversation is over; `state` is handed back on the next turn. Optional, for
    the retrieval and plan metrics: `retrieved_contexts`, the chunks it retrieved in rank
    order (None: not said); `plan`, the steps (tool names) it stated it would take.
    """

    model_config = ConfigDict(extra="allow")

    response: str = ""
    nodes: list[str] = Field(default_factory=list)
    done: bool = False
    state: ConversationState = Field(default_factory=dict)
    retrieved_contexts: list[RetrievedContext] | None = None
    plan: list[str] | None = None


@dataclass(frozen=True)
class TurnContext:
    """The evaluation context of one agent turn: EvalContext plus more `pathgrade.*` entries."""

    eval: EvalContext
    extra: Mapping[str, str | int] = field(default_factory=dict)

    def attributes(self) -> dict[str, str | int]:
        """The `pathgrade.*` span attributes of this turn (empty fields left out)."""
        values: dict[str, str | int | None] = {
            genai.PG_RUN_ID: self.eval.run_id,
            genai.PG_DATASET_ITEM_ID: self.eval.dataset_item_id,
            genai.PG_REPLAY_INDEX: self.eval.replay_index,
            genai.PG_VARIANT_ID: self.eval.variant_id,
            genai.PG_SUITE_VERSION: self.eval.suite_version,
            **self.extra,
        }
        return {key: value for key, value in values.items() if value not in (None, "")}


class AgentAdapter(Protocol):
    """The agent under test, seen one user turn at a time."""

    def respond(
        self, conversation_state: ConversationState, user_message: str, context: TurnContext
    ) -> AgentTurn: ...

    def end_state(
        self, conversation_state: ConversationState, context: TurnContext
    ) -> dict[str, Any] | None: ...


class AdapterError(RuntimeError):
    """The agent could not be loaded or called, or answered something that is not a turn."""


@contextmanager
def eval_baggage(turn_context: TurnContext) -> Iterator[Context]:
    """Attach the turn's `pathgrade.*` entries as OTel baggage for the duration of the block."""
    ctx = context.get_current()
    for key, value in turn_context.attributes().items():
        ctx = baggage.set_baggage(key, str(value), ctx)
    token = context.attach(ctx)
    try:
        yield ctx
    finally:
        context.detach(token)


def pathgrade_context_attributes(ctx: Context | None = None) -> dict[str, str | int]:
    """The `pathgrade.*` baggage entries of `ctx` (default: current) as span attributes.

    Agents call this when they start their root span; `pathgrade.replay.index` comes back
    as an int.
    """
    entries = baggage.get_all(ctx)
    attributes: dict[str, str | int] = {}
    for key, value in entries.items():
        if key.startswith(PATHGRADE_PREFIX):
            text = str(value)
            index = parse_index(text) if key == genai.PG_REPLAY_INDEX else None
            attributes[key] = text if index is None else index
    return attributes


class EvalContextSpanProcessor(SpanProcessor):
    """Copies the `pathgrade.*` baggage entries onto every root span when it starts.

    Add it to the agent's TracerProvider (`pathgrade edge run` does so for in-process
    agents) and the agent needs no pathgrade code at all.
    """

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if span.parent is None:
            span.set_attributes(pathgrade_context_attributes(parent_context))

    def on_end(self, span: ReadableSpan) -> None:
        """Nothing to do when a span ends."""


def _as_state(value: Any, source: str) -> dict[str, Any]:
    """The sandbox state the agent returned: a JSON object."""
    if not isinstance(value, dict):
        raise AdapterError(f"{source}: the end state is not a JSON object: {value!r:.200}")
    return value


def _as_turn(value: Any, source: str) -> AgentTurn:
    """An AgentTurn from what the agent returned (an AgentTurn, a mapping or a string)."""
    if isinstance(value, AgentTurn):
        return value
    if isinstance(value, str):
        return AgentTurn(response=value)
    try:
        return AgentTurn.model_validate(value)
    except ValidationError as error:
        raise AdapterError(f"{source}: the answer is not an agent turn: {error}") from error


class CallableAdapter:
    """A Python function `fn(conversation_state, user_message, context)` as the agent, and
    optionally `state(conversation_state, context)` giving its sandbox's state.

    It runs in this process with the turn's baggage attached, so its spans (exported by
    whatever TracerProvider the process has) carry the evaluation context.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str = "",
        state: Callable[[ConversationState, TurnContext], Any] | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", repr(fn))
        self.state = state

    def respond(
        self, conversation_state: ConversationState, user_message: str, context: TurnContext
    ) -> AgentTurn:
        with eval_baggage(context):
            return _as_turn(self.fn(dict(conversation_state), user_message, context), self.name)

    def end_state(
        self, conversation_state: ConversationState, context: TurnContext
    ) -> dict[str, Any] | None:
        """The agent's `end_state` method's answer (under the turn's baggage, as `respond`
        runs); None when it has none."""
        if self.state is None:
            return None
        with eval_baggage(context):
            return _as_state(self.state(dict(conversation_state), context), self.name)


class HttpAdapter:
    """An agent behind an HTTP endpoint: one JSON POST per user turn.

    Request body: `{"conversation_state", "user_message", "eval_context": {pathgrade.* ->
    value}}`, plus the W3C `baggage` (and `traceparent`, when a span is current) headers.
    Response body: an AgentTurn object (`response`, `nodes`, `done`, `state`).

    With `state_url`, the sandbox's state after an attempt is one JSON POST there:
    `{"conversation_state", "eval_context"}` (same headers) -> a JSON object.
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = 60.0,
        client: httpx.Client | None = None,
        state_url: str | None = None,
    ):
        self.url = url
        self.state_url = state_url
        self.client = client or httpx.Client(timeout=timeout_s)

    def respond(
        self, conversation_state: ConversationState, user_message: str, context: TurnContext
    ) -> AgentTurn:
        body = {"conversation_state": conversation_state, "user_message": user_message}
        return _as_turn(self._post(self.url, body, context), self.url)

    def end_state(
        self, conversation_state: ConversationState, context: TurnContext
    ) -> dict[str, Any] | None:
        """The state endpoint's answer; None without a `state_url`."""
        if self.state_url is None:
            return None
        body = {"conversation_state": conversation_state}
        return _as_state(self._post(self.state_url, body, context), self.state_url)

    def _post(self, url: str, body: dict[str, Any], context: TurnContext) -> Any:
        """POST `body` plus the eval context (JSON and baggage headers); the JSON reply."""
        headers: dict[str, str] = {}
        with eval_baggage(context) as ctx:
            propagate.inject(headers, ctx)
        try:
            reply = self.client.post(
                url, json={**body, "eval_context": context.attributes()}, headers=headers
            )
            reply.raise_for_status()
            return reply.json()
        except (httpx.HTTPError, ValueError) as error:
            raise AdapterError(f"agent at {url}: {error}") from error


def _load_object(spec: str) -> Any:
    """The object named by "module:attr" or "path/to/file.py:attr"."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise AdapterError(f"agent {spec!r}: expected 'module:function' or 'file.py:function'")
    try:
        if target.endswith(".py"):
            path = Path(target).resolve()
            name = f"_pathgrade_agent_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None or not path.is_file():
                raise AdapterError(f"agent {spec!r}: no Python file at {path}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module  # typing and pickling look modules up by name
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ImportError as error:
        raise AdapterError(f"agent {spec!r}: cannot import {target!r}: {error}") from error
    try:
        return getattr(module, attr)
    except AttributeError as error:
        raise AdapterError(f"agent {spec!r}: {target!r} has no attribute {attr!r}") from error


def load_adapter(spec: str, timeout_s: float = 60.0, state_url: str | None = None) -> AgentAdapter:
    """The adapter for `spec`: an http(s) URL (its sandbox state at `state_url`, if given),
    "module:function" or "file.py:function".

    The named object may be a function or an object with a `respond` method (a class is
    instantiated with no arguments) and optionally an `end_state(conversation_state,
    context)` method; either runs in a CallableAdapter, under the baggage.
    """
    if spec.startswith(("http://", "https://")):
        return HttpAdapter(spec, timeout_s, state_url=state_url)
    if state_url is not None:
        raise AdapterError(f"agent {spec!r}: a state URL goes with an http(s) agent only")
    return adapter_for(_load_object(spec), spec)


def adapter_for(target: Any, name: str) -> CallableAdapter:
    """An in-process adapter for a function, an object with `respond` (and optionally
    `end_state`) methods, or a class of such objects (instantiated with no arguments)."""
    if inspect.isclass(target):
        target = target()
    function = getattr(target, "respond", target)
    if not callable(function):
        raise AdapterError(f"agent {name!r}: not callable and has no respond() method")
    return CallableAdapter(function, name, getattr(target, "end_state", None))
