"""`TraceView`: per-turn indexes built once and shared by every detector, and the context.

A view indexes one agent turn (`content.agent_turns`): its top span, its own spans and the
spans enclosing it. What the turn says of itself (turn kind, confirmation, final answer)
is read from its top span, else from the nearest enclosing span that encloses this turn
only (a "handle turn" or HTTP server span); who the session is and its conversation from
the top, then every enclosing span, then any span of the turn.

Every index reads captured content when the trace has it and the collector's facts
(`schemas.facts`, on `Span.facts`) when it does not, so a detector decides on redacted
traffic: equality through fingerprints, the final answer through its output facts,
untrusted content through the lexicon hits the collector recorded. A tool call whose spans
do not name its arguments has those of the call the model requested that it answers
(`TraceView.requested_answers`), captured or fingerprinted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pathgrade.content.conventions import (
    NOT_REBUILT,
    handoff_spans,
    handoff_tool_names,
    is_agent_entry,
    is_model_helper,
    session_identity,
)
from pathgrade.content.events import ToolCallDecision, tool_call_decisions
from pathgrade.content.facts_producer import requested_writes
from pathgrade.content.fingerprints import same_value
from pathgrade.content.graph_walk import NodeVisit, langgraph_nodes, node_visits
from pathgrade.content.handoffs import AgentRun, HandoffFlow, handoff_flow
from pathgrade.content.memo import cached_attribute
from pathgrade.content.messages import (
    RequestedToolCall,
    answer_text,
    parse_messages,
    requested_calls,
    untrusted_texts,
)
from pathgrade.content.predicates import RequestPatterns, call_arguments, requested_arguments
from pathgrade.detectors.conventions import WRITE_EFFECTS, Conventions, ToolEffect
from pathgrade.detectors.prices import PriceTable, shipped_price_table
from pathgrade.schemas import genai
from pathgrade.schemas.facts import ArgumentFacts, OutputFacts
from pathgrade.schemas.json_text import parse_json, sorted_text
from pathgrade.schemas.model import Span, Trace
from pathgrade.schemas.personal_data import Counts
from pathgrade.schemas.turns import ConfirmedAction, TurnDigest

HANDOFF = -1
"""`TraceView.requested_answers`: a handoff span answers the requested call."""


class ToolCall(NamedTuple):
    """One tool call: its execute_tool span (or the spans that describe it, `same_call`),
    its arguments parsed once and its effect resolved (a named tuple, as
    `RequestedToolCall`: one is built per tool call of every trace, at a fraction of a
    frozen dataclass's cost)."""

    span: Span  # the span its arguments are read from (else the outermost of `spans`)
    name: str
    arguments: dict[str, Any] | None  # None when not captured or not a JSON object
    argument_fps: dict[str, str] | None  # name -> fingerprint (facts); None without facts
    # (both: the span's own, else those of the requested call it answers)
    effect: ToolEffect | None
    idempotency_key: str
    agent_name: str
    signature: str | None  # name + canonical arguments (idempotency args excluded)
    call_id: str  # gen_ai.tool.call.id of any of its spans, "" when none carries one
    spans: tuple[Span, ...]  # every span describing the call, in start order

    @property
    def is_write(self) -> bool:
        return self.effect in WRITE_EFFECTS

    @property
    def failed(self) -> bool:
        return any(s.status_code == "Error" or s.genai.error_type for s in self.spans)

    @property
    def skeleton(self) -> dict[str, Any] | None:
        """The collector's skeleton of the arguments (keys, types, lengths), if recorded."""
        facts = self.span.facts.arguments
        return facts.skeleton if facts is not None else None

    @property
    def names_arguments(self) -> bool:
        """Whether the call's arguments are known by name (values or fingerprints)."""
        return self.arguments is not None or self.argument_fps is not None

    @property
    def arguments_known(self) -> bool:
        """True when the call's arguments are known as values or fingerprints, or a span
        of it recorded what the call returned (captured, or the collector's check of it)
        and none recorded arguments: a call without arguments. A span that records
        neither tells nothing (the GenAI conventions make both opt-in: an SDK that does
        not capture content records neither), nor do its facts of other things (the
        session identity some instrumentations put on every span)."""
        return self.names_arguments or any(
            s.genai.tool_result or s.facts.instructions is not None for s in self.spans
        )

    def argument_names(self) -> set[str]:
        """The names of the call's arguments, from its values or its facts."""
        if self.argument_fps is not None:
            return set(self.argument_fps)
        return set(self.arguments or ())


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """The turn's final answer: its top span's output (or an enclosing span's that encloses
    this turn only), else the last model output.

    `text` is the captured text ("" when the output asked for tools instead), None when
    only facts say what the output was.
    """

    span: Span
    text: str | None
    has_text: bool  # a non-blank text answer (no tool calls requested instead)
    facts: OutputFacts | None

    @property
    def pii(self) -> Counts:
        """Personal data the collector found in the answer text before scrubbing it."""
        return self.facts.pii if self.facts is not None else {}


@dataclass(frozen=True, slots=True)
class UntrustedContent:
    """Content of one span the agent did not get from the user: its captured text, or the
    instruction-lexicon names the collector found in it."""

    span: Span
    text: str | None
    instructions: tuple[str, ...] | None  # facts: lexicon names found; None without facts


class TraceView:
    """Indexes over one turn: its top span, tool calls, chat spans, final answer."""

    def __init__(self, trace: Trace, conventions: Conventions) -> None:
        self.trace = trace
        self.conventions = conventions
        self.top: Span | None = trace.root
        self.own_spans: list[Span] = trace.own_spans()
        self.chat_spans: list[Span] = [
            s
            for s in trace.spans
            if s.genai.operation in genai.MODEL_OPERATIONS
            and not is_model_helper(s.name, s.attributes, s.genai)
        ]
        self._by_id = {s.span_id: s for s in trace.spans}
        tool_spans = [
            s
            for s in trace.spans
            if s.genai.operation == genai.OP_EXECUTE_TOOL and not handoff_tool_names(s.name)
        ]
        groups = same_call(tool_spans, self._by_id)
        self.tool_calls: list[ToolCall] = [self._tool_call(spans) for spans in groups]
        """The turn's tool calls: its execute_tool spans but the handoff spans, which are
        hand-offs (`handoffs`, `handoff_flow`), not calls of the agent's tools. A call
        whose spans do not name its arguments (a bare value, or none) has those of the
        requested call it answers (`requested_answers`)."""
        unnamed = [i for i, c in enumerate(self.tool_calls) if not c.names_arguments]
        if unnamed and self.chat_spans:
            requested = self._requested_of_calls()
            for index in unnamed:
                if index in requested:
                    self.tool_calls[index] = self._tool_call(groups[index], requested[index])

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id

    @property
    def top_span_id(self) -> str:
        return self.top.span_id if self.top else ""

    def turn_attribute(self, name: str) -> Any:
        """An attribute of the turn's top span, else of the nearest enclosing span that
        encloses this turn only; None when none has it."""
        for span in self.own_spans:
            value = span.attributes.get(name)
            if value is not None:
                return value
        return None

    @cached_attribute
    def has_agent_span(self) -> bool:
        """Whether an agent span runs the turn (`content.conventions.is_agent_entry`)."""
        spans = self.trace.spans
        return any(is_agent_entry(s.name, s.genai.operation, s.attributes) for s in spans)

    @cached_attribute
    def handoffs(self) -> list[tuple[Span, tuple[str, ...]]]:
        """The turn's handoff spans, each with the tools whose call it answers
        (`content.conventions.handoff_tool_names`)."""
        return handoff_spans(self.trace.spans)

    @cached_attribute
    def tool_call_decisions(self) -> list[ToolCallDecision]:
        """The decisions on the turn's proposed tool calls (`gen_ai.tool.call.decision`),
        in time order: recorded on its spans or the spans enclosing it only, and those
        recorded while its top span ran on a span enclosing other turns too (an app's
        span, current where a framework runs the tool outside its tool span)."""
        top = self.top
        trace = self.trace
        found = tool_call_decisions(trace.spans + self.own_spans[1:])
        shared = tool_call_decisions(trace.context[trace.own_context :])
        if top is not None:
            found += [d for d in shared if top.start_ns <= d.time_ns <= top.end_ns]
        return sorted(found)

    def decision_tool(self, decision: ToolCallDecision) -> str:
        """The tool a decision is about: the one it names, else the tool of the requested
        call with its id; "" when neither is known."""
        if decision.tool_name or not decision.tool_call_id:
            return decision.tool_name
        requested = (c for _, c in self.requested_tool_calls if c.call_id)
        return next((c.name for c in requested if c.call_id == decision.tool_call_id), "")

    @cached_attribute
    def requested_writes(self) -> dict[str, bool]:
        """For each write tool whose requests are known, whether the turn's request (its
        last user message) asked for it: the collector's record (`pathgrade.facts.requests`)
        on the turn's spans and the policy's `requests` matched on captured input messages
        (`content.facts_producer.requested_writes`, one definition for both); a tool asked
        for by either counts as asked. {} when neither says anything."""
        asked: dict[str, bool] = {}
        spans = self.own_spans + self.trace.spans
        patterns = RequestPatterns(self.conventions.requests) if self.conventions.requests else None
        for span in spans:
            found = [span.facts.requests or {}]
            if patterns is not None and span.genai.input_messages:
                found.append(requested_writes(span.genai, NOT_REBUILT, patterns) or {})
            for record in found:
                for tool, yes in record.items():
                    asked[tool] = asked.get(tool, False) or yes
        return asked

    @cached_attribute
    def langgraph_nodes(self) -> dict[str, str]:
        """The turn's LangGraph node visits, span id -> node (`content.graph_walk`): read
        once for the walk and the hand-offs."""
        return langgraph_nodes(self.trace.spans)

    @cached_attribute
    def node_visits(self) -> list[NodeVisit]:
        """The turn's walk through an agent graph, from its node spans (`content.graph_walk`)."""
        return node_visits(self.trace, self.langgraph_nodes)

    @cached_attribute
    def handoff_flow(self) -> HandoffFlow:
        """The turn's agent runs and the hand-offs between them (`content.handoffs`)."""
        return handoff_flow(self.trace, self.langgraph_nodes)

    def calls_of(self, run: AgentRun) -> list[ToolCall]:
        """The tool calls the agent run `run` made, in start order."""
        owned = {span.span_id for span in run.spans}
        return [call for call in self.tool_calls if call.span.span_id in owned]

    def identity_of(self, span: Span) -> str:
        """The session identity `span` itself carries: the collector's fingerprint of it,
        else the captured value of the policy's identity attribute; "" when it carries
        none."""
        if span.facts.session and self.conventions.identity.attribute == genai.ENDUSER_ID:
            return span.facts.session
        attribute = self.conventions.identity.attribute
        if attribute == genai.ENDUSER_ID:
            return session_identity(span.attributes)
        value = span.attributes.get(attribute)
        return "" if value in (None, "") else str(value)

    def enclosing(self, span: Span) -> set[str]:
        """The ids of the spans above `span` in the turn (a parent cycle ends the walk)."""
        found: set[str] = set()
        current = self._by_id.get(span.parent_span_id)
        while current is not None and current.span_id not in found:
            found.add(current.span_id)
            current = self._by_id.get(current.parent_span_id)
        return found

    @cached_attribute
    def turn_kind(self) -> str:
        """`pathgrade.turn.kind` of the turn ("action", "read") or "" when absent."""
        value = self.turn_attribute(genai.PG_TURN_KIND)
        return value if isinstance(value, str) else ""

    @cached_attribute
    def session_identity(self) -> str:
        """The captured session identity from the top span, else an enclosing span, else
        any span of the turn; "" when absent. The default attribute (`enduser.id`) reads
        every convention's identity attribute (`user.id` among them)."""
        attribute = self.conventions.identity.attribute
        for span in self.trace.session_spans():
            if attribute == genai.ENDUSER_ID:
                value: Any = session_identity(span.attributes) or session_identity(
                    span.resource_attributes
                )
            else:
                value = span.attributes.get(attribute, span.resource_attributes.get(attribute))
            if value not in (None, ""):
                return str(value)
        return ""

    @cached_attribute
    def session_fingerprint(self) -> str:
        """The collector's fingerprint of the session identity (top span first), ""."""
        if self.conventions.identity.attribute != genai.ENDUSER_ID:
            return ""  # a custom identity attribute has no fingerprint
        return next((s.facts.session for s in self.trace.session_spans() if s.facts.session), "")

    @property
    def has_session(self) -> bool:
        return bool(self.session_fingerprint or self.session_identity)  # the facts first:
        # on default settings the identity is not captured, and looking for it reads every span

    def is_session(self, call: ToolCall, argument: str) -> bool | None:
        """Whether `argument` of `call` equals the session identity; None when the two
        cannot be compared (no identity, values neither captured nor fingerprinted)."""
        fp = (call.argument_fps or {}).get(argument)
        if fp and self.session_fingerprint:
            return same_value(fp, self.session_fingerprint)
        if call.arguments is not None and argument in call.arguments and self.session_identity:
            return str(call.arguments[argument]) == self.session_identity
        return None

    @cached_attribute
    def confirmed_actions(self) -> list[ConfirmedAction]:
        """The confirmation recorded on this turn (`pathgrade.confirmed_action`, on its top
        span or a span enclosing it only; zero or one)."""
        holder = next(
            (s for s in self.own_spans
             if genai.PG_CONFIRMED_ACTION in s.attributes or s.facts.confirmed_name),
            None,
        )  # fmt: skip
        if holder is None:
            return []
        value = parse_json(str(holder.attributes.get(genai.PG_CONFIRMED_ACTION) or ""))
        facts = holder.facts
        arguments: dict[str, Any] | None
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            name, arguments = value["name"], value.get("arguments")
            arguments = arguments if isinstance(arguments, dict) else {}
        elif facts.confirmed_name:
            name, arguments = facts.confirmed_name, None
        else:
            return []
        fps = facts.confirmed.fingerprints if facts.confirmed is not None else None
        return [ConfirmedAction(name=name, arguments=arguments, argument_fps=fps)]

    @cached_attribute
    def answer(self) -> FinalAnswer | None:
        """The final answer (see FinalAnswer); None when no output was captured or
        recorded at all."""
        span = self._answer_span()
        if span is None:
            return None
        facts = span.facts.output
        messages = parse_messages(span.genai.output_messages)
        if messages:
            text = "" if requested_calls(messages) else answer_text(messages)
            return FinalAnswer(span, text, bool(text.strip()), facts)
        assert facts is not None
        return FinalAnswer(span, None, facts.has_text and not facts.tool_call_ids, facts)

    def _answer_span(self) -> Span | None:
        """The top span's output, else that of a span enclosing this turn only, else the
        last model output of the turn."""
        own = next((s for s in self.own_spans if _has_output(s)), None)
        if own is not None:
            return own
        outputs = [s for s in self.chat_spans if _has_output(s)]
        return max(outputs, key=lambda s: s.end_ns) if outputs else None

    @property
    def final_answer(self) -> str | None:
        """The captured final answer text ("" when the run ended without one); None when
        the output's text was not captured."""
        answer = self.answer
        return answer.text if answer is not None else None

    @cached_attribute
    def requested_tool_calls(self) -> list[tuple[Span, RequestedToolCall]]:
        """Tool calls requested in model output messages (captured, else the collector's
        record of them), with the requesting span."""
        calls = []
        for span in self.chat_spans:
            messages = parse_messages(span.genai.output_messages)
            if messages:
                calls += [(span, c) for c in requested_calls(messages)]
            elif span.facts.output is not None:
                output = span.facts.output
                calls += [
                    (span, RequestedToolCall(call_id, name, None, _fingerprints(arguments)))
                    for call_id, name, arguments in zip(
                        output.tool_call_ids,
                        output.tool_call_names,
                        output.tool_call_arguments,
                        strict=False,
                    )
                ]
        return calls

    @cached_attribute
    def requested_answers(self) -> list[int | None]:
        """For each requested tool call (`requested_tool_calls`, in order), what answers
        it: the index in `tool_calls` of the call with its id, else a handoff span with
        its id (HANDOFF), else, by name, the first tool call without an id (or handoff
        span, as the convention mapping pairs them: "handoff to billing" answers
        `transfer_to_billing`) that no earlier request took; None when nothing does, or the
        request has no id."""
        by_id: dict[str, int] = {}
        for index, call in enumerate(self.tool_calls):
            if call.call_id:
                by_id.setdefault(call.call_id, index)
        handoff_ids = {span.genai.tool_call_id for span, _ in self.handoffs}
        anonymous = [(c.name, i) for i, c in enumerate(self.tool_calls) if not c.call_id]
        anonymous += [(name, HANDOFF) for _, names in self.handoffs for name in names]
        answers: list[int | None] = []
        for _, call in self.requested_tool_calls:
            answer = by_id.get(call.call_id) if call.call_id else None
            if call.call_id and answer is None:
                if call.call_id in handoff_ids:
                    answer = HANDOFF
                else:
                    taken = next((a for a in anonymous if a[0] == call.name), None)
                    if taken is not None:
                        anonymous.remove(taken)
                        answer = taken[1]
            answers.append(answer)
        return answers

    def _requested_of_calls(self) -> dict[int, RequestedToolCall]:
        """The requested call each tool call answers, by its index in `tool_calls`."""
        pairs = zip(self.requested_tool_calls, self.requested_answers, strict=True)
        return {answer: call for (_, call), answer in pairs if answer is not None and answer >= 0}

    @cached_attribute
    def untrusted_content(self) -> list[UntrustedContent]:
        """Content not typed by the user: tool results, retrieved documents, tool messages
        and document parts, as captured text or as the collector's lexicon hits."""
        found = []
        for span in self.trace.spans:
            texts = _untrusted_texts_of(span)
            if texts:
                found += [UntrustedContent(span, text, span.facts.instructions) for text in texts]
            elif span.facts.instructions is not None:
                found.append(UntrustedContent(span, None, span.facts.instructions))
        return found

    @cached_attribute
    def tool_definitions(self) -> dict[str, dict[str, Any]]:
        """Tool JSON Schemas from `gen_ai.tool.definitions` on model spans: name -> schema."""
        schemas: dict[str, dict[str, Any]] = {}
        for span in self.chat_spans:
            raw = span.attributes.get(genai.TOOL_DEFINITIONS)
            definitions = parse_json(raw) if isinstance(raw, str) else raw
            for definition in definitions if isinstance(definitions, list) else []:
                if isinstance(definition, dict):
                    function = definition.get("function", definition)
                    name, schema = function.get("name"), function.get("parameters")
                    if isinstance(name, str) and isinstance(schema, dict):
                        schemas[name] = schema
        return schemas

    def agent_of(self, span: Span) -> str:
        """The agent that ran `span`: its own agent name, else its nearest agent ancestor's."""
        current: Span | None = span
        while current is not None:
            if current.genai.agent_name:
                return current.genai.agent_name
            current = self._by_id.get(current.parent_span_id)
        return ""

    def _tool_call(self, spans: list[Span], requested: RequestedToolCall | None = None) -> ToolCall:
        """The call `spans` describe (outermost first): its arguments from the first of
        them that knows them, else, when none names them, from the `requested` call it
        answers."""
        span = next((s for s in spans if _knows_arguments(s)), spans[0])
        arguments = call_arguments(span.genai.tool_arguments)
        facts = span.facts.arguments
        fps = facts.fingerprints if facts is not None else None
        if arguments is None and fps is None and requested is not None:
            arguments = requested_arguments(requested.arguments)
            fps = requested.argument_fps
        idempotency = self.conventions.idempotency
        keys = (_value_key(arguments, fps, a) for a in idempotency.arguments)
        key = span.attributes.get(idempotency.attribute) or next((k for k in keys if k), "")
        name = span.genai.tool_name or span.name
        return ToolCall(
            span=span,
            name=name,
            arguments=arguments,
            argument_fps=fps,
            effect=self.conventions.tools.effect_of(
                name, span.attributes.get(genai.PG_TOOL_EFFECT)
            ),
            idempotency_key=str(key),
            agent_name=self.agent_of(span),
            signature=_signature(name, arguments, fps, facts, idempotency.arguments),
            call_id=next((s.genai.tool_call_id for s in spans if s.genai.tool_call_id), ""),
            spans=tuple(spans),
        )


def same_call(tool_spans: list[Span], by_id: dict[str, Span]) -> list[list[Span]]:
    """Tool spans (in start order) grouped by the call they describe, in order of each
    call's first span: spans with the same `gen_ai.tool.call.id`, and a tool span nested
    in a tool span of the same tool (a framework's own span inside its instrumentor's,
    AutoGen under OpenInference); every other span is a call of its own."""
    groups: list[list[Span]] = []
    of_span: dict[str, int] = {}
    of_call_id: dict[str, int] = {}
    for span in tool_spans:
        call_id = span.genai.tool_call_id
        group = of_call_id.get(call_id) if call_id else None
        if group is None:
            group = _enclosing_call(span, by_id, of_span)
        if group is None:
            group = len(groups)
            groups.append([])
        groups[group].append(span)
        of_span[span.span_id] = group
        if call_id:
            of_call_id.setdefault(call_id, group)
    return groups


def _enclosing_call(span: Span, by_id: dict[str, Span], of_span: dict[str, int]) -> int | None:
    """The group of the nearest tool span above `span` when it calls the same tool."""
    seen = {span.span_id}
    current = by_id.get(span.parent_span_id)
    while current is not None and current.span_id not in seen:
        if current.span_id in of_span:
            same = (current.genai.tool_name or current.name) == (span.genai.tool_name or span.name)
            return of_span[current.span_id] if same else None
        seen.add(current.span_id)
        current = by_id.get(current.parent_span_id)
    return None


def _fingerprints(arguments: ArgumentFacts | None) -> dict[str, str] | None:
    return arguments.fingerprints if arguments is not None else None


def _knows_arguments(span: Span) -> bool:
    """Whether a tool span carries its call's arguments (captured, or the collector's facts)."""
    return bool(span.genai.tool_arguments) or span.facts.arguments is not None


def _has_output(span: Span) -> bool:
    return bool(parse_messages(span.genai.output_messages)) or span.facts.output is not None


def _value_key(arguments: dict[str, Any] | None, fps: dict[str, str] | None, name: str) -> str:
    """What stands for an argument's value in comparisons: its fingerprint, else its text;
    "" when the call has no such argument."""
    if fps is not None and name in fps:
        return fps[name]
    value = (arguments or {}).get(name)
    return "" if value is None else str(value)


def _signature(
    name: str,
    arguments: dict[str, Any] | None,
    fps: dict[str, str] | None,
    facts: ArgumentFacts | None,
    ignored: tuple[str, ...],
) -> str | None:
    """Name + canonical arguments without the ignored ones: fingerprints when the
    collector recorded them (`fps`; they were taken before scrubbing, so two different
    e-mail addresses never look alike), else the fingerprint of arguments that are not an
    object (`facts`), else the captured values; None with none."""
    if fps is not None:
        kept = {k: v for k, v in fps.items() if k not in ignored}
        return name + sorted_text(kept)  # fingerprints: text, default never needed
    if facts is not None:
        return f"{name}:{facts.fingerprint}"  # arguments that are not a JSON object
    if arguments is None:
        return None
    payload = {k: v for k, v in arguments.items() if k not in ignored}
    return name + sorted_text(payload)


def _untrusted_texts_of(span: Span) -> list[str]:
    """The captured untrusted texts of one span."""
    texts = []
    if span.genai.operation == genai.OP_EXECUTE_TOOL and span.genai.tool_result:
        texts.append(span.genai.tool_result)
    documents = span.attributes.get(genai.RETRIEVAL_DOCUMENTS)
    if documents:
        texts.append(documents if isinstance(documents, str) else str(documents))
    if span.genai.operation in genai.MODEL_OPERATIONS:
        texts += [t for m in parse_messages(span.genai.input_messages) for t in untrusted_texts(m)]
    return texts


def turn_digest(view: TraceView, conversation_id: str) -> TurnDigest:
    """What later turns of the conversation may know about the turn `view` indexes."""
    trace = view.trace
    top = view.top
    return TurnDigest(
        tenant=trace.tenant,
        conversation_id=conversation_id,
        trace_id=trace.trace_id,
        start_ns=top.start_ns if top else (trace.spans[0].start_ns if trace.spans else 0),
        succeeded_tools=[c.name for c in view.tool_calls if not c.failed],
        confirmed_actions=view.confirmed_actions,
        graph_nodes=[visit.node for visit in view.node_visits],
        span_id=view.top_span_id,
    )


@dataclass(slots=True)
class DetectorContext:
    """What a detector may know beyond the trace: earlier turns, conventions, price table.

    `history` holds digests of earlier turns of the same conversation, oldest first,
    bounded by the caller (`turn_digest`: a detector reads earlier turns only through
    what a digest carries).
    """

    conventions: Conventions = field(default_factory=Conventions)
    prices: PriceTable = field(default_factory=shipped_price_table)
    history: list[TurnDigest] = field(default_factory=list)
    _view: TraceView | None = None  # the view of the last trace asked for

    def view_of(self, trace: Trace) -> TraceView:
        """The view of `trace` under these conventions (built once per trace)."""
        if self._view is None or self._view.trace is not trace:
            self._view = TraceView(trace, self.conventions)
        return self._view
