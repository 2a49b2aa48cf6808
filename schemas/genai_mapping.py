"""The convention mapping as data: which attribute keys feed which GenAI field, in which
order, and how each convention's span kinds name an operation.

One definition, two readers: `content.conventions` (the Python decoder every consumer of
`pathgrade.spans` runs) and `batch_plane.store.genai_sql` (the SQL expressions the store computes
its GenAI columns with when ClickHouse parses OTLP itself) are both derived from these
tables and rules, so the two cannot drift apart: each reader interprets a rule (which
sources, in which order, under which condition) in its own language and holds no
precedence of its own; tests/unit/batch_plane/store/test_genai_sql_parity.py checks that they agree
on every span the SQL decides (the SQL declines, by reason, what it does not read as
Python does: `genai_sql.DECLINES`), and tests/integration/test_store_sql_parity.py that
the store's rows do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pathgrade.schemas import genai as g
from pathgrade.schemas.genai_versions import older_names

OPENINFERENCE_OPERATIONS: dict[str, str] = {
    "LLM": g.OP_CHAT,
    "TOOL": g.OP_EXECUTE_TOOL,
    "AGENT": g.OP_INVOKE_AGENT,
    "CHAIN": "chain",
    "RETRIEVER": g.OP_RETRIEVAL,
    "EMBEDDING": g.OP_EMBEDDINGS,
    "RERANKER": "rerank",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "evaluator",
    "PROMPT": "prompt",
}
TRACELOOP_OPERATIONS: dict[str, str] = {
    "workflow": g.OP_INVOKE_AGENT,
    "agent": g.OP_INVOKE_AGENT,
    "tool": g.OP_EXECUTE_TOOL,
    "task": "task",
}
LLM_REQUEST_TYPE_OPERATIONS: dict[str, str] = {
    "chat": g.OP_CHAT,
    "completion": g.OP_TEXT_COMPLETION,
    "embedding": g.OP_EMBEDDINGS,
    "embeddings": g.OP_EMBEDDINGS,
    "rerank": "rerank",
}
AGENT_OPERATIONS = frozenset({g.OP_INVOKE_AGENT, g.OP_CREATE_AGENT})
TRACELOOP_AGENT_KINDS = frozenset({"workflow", "agent"})
# Operations whose spans may carry chat messages in flattened form.
MESSAGE_OPERATIONS = frozenset({g.OP_CHAT, g.OP_TEXT_COMPLETION, g.OP_GENERATE_CONTENT})

PROVIDER_KEYS = (
    g.PROVIDER_NAME, *older_names(g.PROVIDER_NAME), g.OI_LLM_PROVIDER, g.OI_LLM_SYSTEM,
)  # fmt: skip
AGENT_NAME_KEYS = (g.AGENT_NAME, g.OI_AGENT_NAME)
TOOL_NAME_KEYS = (g.TOOL_NAME, g.OI_TOOL_NAME)
TOOL_CALL_ID_KEYS = (g.TOOL_CALL_ID, g.OI_TOOL_CALL_ID, g.OI_TOOL_ID)
TOOL_ARGUMENT_FALLBACK_KEYS = (g.OI_INPUT_VALUE, g.TL_ENTITY_INPUT)
TOOL_RESULT_FALLBACK_KEYS = (g.OI_OUTPUT_VALUE, g.TL_ENTITY_OUTPUT)
CONVERSATION_KEYS = (g.CONVERSATION_ID, g.OI_SESSION_ID, g.TL_SESSION_ID)
REQUEST_MODEL_KEYS = (
    g.REQUEST_MODEL,
    g.OI_LLM_REQUEST_MODEL_NAME,
    g.OI_LLM_MODEL_NAME,
    g.TL_LLM_REQUEST_MODEL,
)
RESPONSE_MODEL_KEYS = (g.RESPONSE_MODEL, g.OI_LLM_RESPONSE_MODEL_NAME, g.TL_LLM_RESPONSE_MODEL)
INPUT_TOKEN_KEYS = (
    g.USAGE_INPUT_TOKENS,
    *older_names(g.USAGE_INPUT_TOKENS),
    g.OI_TOKEN_COUNT_PROMPT,
    g.TL_LLM_USAGE_PROMPT_TOKENS,
)
OUTPUT_TOKEN_KEYS = (
    g.USAGE_OUTPUT_TOKENS,
    *older_names(g.USAGE_OUTPUT_TOKENS),
    g.OI_TOKEN_COUNT_COMPLETION,
    g.TL_LLM_USAGE_COMPLETION_TOKENS,
)
TOTAL_TOKEN_KEYS = (g.OI_TOKEN_COUNT_TOTAL, g.TL_LLM_USAGE_TOTAL_TOKENS)
TOKEN_KEYS = frozenset(INPUT_TOKEN_KEYS + OUTPUT_TOKEN_KEYS + TOTAL_TOKEN_KEYS)
"""The token-usage keys `content.conventions.genai_fields` reads, behind one test of whether
a span has any."""
FINISH_REASON_KEYS = (g.RESPONSE_FINISH_REASONS, g.OI_LLM_FINISH_REASON)

INPUT_MESSAGE_PREFIXES = (g.OI_INPUT_MESSAGES_PREFIX, g.TL_PROMPT_PREFIX)
OUTPUT_MESSAGE_PREFIXES = (g.OI_OUTPUT_MESSAGES_PREFIX, g.TL_COMPLETION_PREFIX)
FLATTENED_PREFIXES = INPUT_MESSAGE_PREFIXES + OUTPUT_MESSAGE_PREFIXES
# Key segments that only namespace a leaf (OpenInference's "message.", "tool_call.", ...).
# Keys of a first flattened message; the scan of all keys runs only when one is present.
FLATTENED_PROBE_KEYS = (
    "llm.input_messages.0.message.role",
    "llm.output_messages.0.message.role",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.role",
    "gen_ai.completion.0.content",
)
NAMESPACE_SEGMENTS = frozenset({"message", "tool_call", "function", "message_content"})
INDEXED_LISTS = frozenset({"tool_calls", "contents"})


@dataclass(frozen=True, slots=True)
class KindSource:
    """An attribute that names the span's operation through `table`. `unknown`: what a
    value outside the table does; "lowercase": a present value decides, as its lowercased
    text (`unknown_value`, "UNKNOWN", as none), "skip": the next source decides. `upper`:
    the value is upper-cased before the lookup."""

    key: str
    table: dict[str, str]
    unknown: Literal["lowercase", "skip"]
    upper: bool = False
    unknown_value: str = ""


OPERATION_KEY = g.OPERATION_NAME
"""The operation as the GenAI convention names it: decides first when not empty."""
OPERATION_SOURCES = (
    KindSource(g.OI_SPAN_KIND, OPENINFERENCE_OPERATIONS, "lowercase", True, "UNKNOWN"),
    KindSource(g.TL_SPAN_KIND, TRACELOOP_OPERATIONS, "skip"),
    KindSource(g.TL_LLM_REQUEST_TYPE, LLM_REQUEST_TYPE_OPERATIONS, "skip"),
)
"""After `OPERATION_KEY`, in order; then the span name's first word when it is a GenAI
operation."""


@dataclass(frozen=True, slots=True)
class NameRule:
    """A name-like field: the first text of `keys`; else `traceloop.entity.name` on spans
    whose `traceloop.span.kind` is one of `entity_kinds`; else the span name's target
    ("chat gpt-4o" -> "gpt-4o") when the span's operation is one of `target_operations`
    and the name's first word."""

    keys: tuple[str, ...]
    entity_kinds: frozenset[str]
    target_operations: frozenset[str]


AGENT_NAME = NameRule(AGENT_NAME_KEYS, TRACELOOP_AGENT_KINDS, AGENT_OPERATIONS)
TOOL_NAME = NameRule(TOOL_NAME_KEYS, frozenset({"tool"}), frozenset({g.OP_EXECUTE_TOOL}))
REQUEST_MODEL = NameRule(REQUEST_MODEL_KEYS, frozenset(), frozenset(g.MODEL_OPERATIONS))
NAME_RULES = (AGENT_NAME, TOOL_NAME, REQUEST_MODEL)
"""The name-like fields, in the order `content.conventions` reads them."""


@dataclass(frozen=True, slots=True)
class ToolContentRule:
    """A tool call's arguments or result: `key`; empty, on `execute_tool` spans, the first
    text of `fallback_keys`."""

    key: str
    fallback_keys: tuple[str, ...]


TOOL_ARGUMENTS = ToolContentRule(g.TOOL_CALL_ARGUMENTS, TOOL_ARGUMENT_FALLBACK_KEYS)
TOOL_RESULT = ToolContentRule(g.TOOL_CALL_RESULT, TOOL_RESULT_FALLBACK_KEYS)


@dataclass(frozen=True, slots=True)
class MessagesRule:
    """A model call's input or output messages: `key`; when it is empty on a span of
    `MESSAGE_OPERATIONS` that does not hold both `MESSAGES_KEYS`: the flattened messages
    under `flattened_prefixes` (the Python reader only: the SQL reader never sees them),
    then `deprecated_key`, then `openinference_key` on spans whose OpenInference kind is
    `openinference_kind`. `finish_reasons`: the flattened messages' finish reasons are
    the span's when it names none."""

    key: str
    flattened_prefixes: tuple[str, ...]
    deprecated_key: str
    openinference_key: str
    finish_reasons: bool = False
    openinference_kind: str = "LLM"


MESSAGES_KEYS = (g.INPUT_MESSAGES, g.OUTPUT_MESSAGES)
INPUT_MESSAGES = MessagesRule(
    g.INPUT_MESSAGES, INPUT_MESSAGE_PREFIXES, g.PROMPT_DEPRECATED, g.OI_INPUT_VALUE
)
OUTPUT_MESSAGES = MessagesRule(
    g.OUTPUT_MESSAGES, OUTPUT_MESSAGE_PREFIXES, g.COMPLETION_DEPRECATED, g.OI_OUTPUT_VALUE, True
)
MESSAGES_RULES = (INPUT_MESSAGES, OUTPUT_MESSAGES)
"""Input, then output: the order `content.conventions` reads them in."""
MESSAGE_FALLBACK_KEYS = frozenset(
    FLATTENED_PROBE_KEYS
    + tuple(k for rule in MESSAGES_RULES for k in (rule.deprecated_key, rule.openinference_key))
)
"""Every key `content.conventions` can rebuild messages from when a span has no GenAI
messages (flattened messages are collected only when a probe key is present; the
OpenInference kind only selects a key of these): a model call holding none of them (its
messages dropped by the collector, say) has none to rebuild."""


TURN_OPERATIONS = frozenset(
    {g.OP_INVOKE_AGENT, g.OP_INVOKE_WORKFLOW, g.OP_HANDLE_CONVERSATION_TURN}
)
"""Operations (the mapped operation, or a span name's first word) of a span that runs an
agent: the outermost such span of a service is the top of a turn (`content.agent_turns`).
OpenInference AGENT and OpenLLMetry workflow / agent spans map to invoke_agent."""
AGENT_SPAN_NAMES = frozenset({"agent run"})
"""Names of spans without an operation that run an agent: Pydantic AI's agent span at its
instrumentation version 2 and before (later versions name it `invoke_agent <agent>`)."""


@dataclass(frozen=True, slots=True)
class GraphRootRule:
    """A span that runs an agent graph without naming an agent operation: its
    `openinference.span.kind` is `kind` and its `metadata_key` JSON says
    `integration_key: integration` and names no `node_key`."""

    kind: str
    metadata_key: str
    integration_key: str
    integration: str
    node_key: str


LANGGRAPH_ROOT = GraphRootRule(
    g.OI_SPAN_KIND_CHAIN, g.OI_METADATA, "ls_integration", "langgraph", "langgraph_node"
)
"""LangGraph's graph root under OpenInference: a CHAIN span named after the graph, whose
metadata names the integration and no node (its node spans name theirs)."""


@dataclass(frozen=True, slots=True)
class MethodRule:
    """A span an instrumentor names after the method it wraps (`<class>.<method>`), known
    by its `openinference.span.kind` (`kind`) and that name: its class name ends with one
    of `class_suffixes` (any class: ()) and its method is `method`, or, with `private`,
    starts with `_`."""

    kind: str
    class_suffixes: tuple[str, ...] = ()
    method: str = ""
    private: bool = False

    def names(self, span_name: str) -> bool:
        """Whether `span_name` is such a method's."""
        owner, dot, method = span_name.rpartition(".")
        if not dot or not owner or not owner.endswith(self.class_suffixes or ("",)):
            return False
        return method.startswith("_") if self.private else method == self.method


AGENT_RUNS = (MethodRule(g.OI_SPAN_KIND_CHAIN, ("Agent", "AgentWorkflow"), "run"),)
"""Spans that run an agent without naming an agent operation: LlamaIndex's workflow agents
under OpenInference, a CHAIN span `FunctionAgent.run` (`ReActAgent.run`,
`CodeActAgent.run`, `AgentWorkflow.run`, a subclass named `...Agent`)."""
MODEL_HELPERS = (MethodRule(g.OI_SPAN_KIND_LLM, private=True),)
"""Spans of a model operation that call no model when they report no token usage: a
private method of a model class OpenInference's LlamaIndex instrumentation records as an
LLM span (`OpenAI._prepare_chat_with_tools` builds the request the next span sends)."""


@dataclass(frozen=True, slots=True)
class HandoffRule:
    """A span recording an agent's handoff to another, which answers the tool call that
    requested it: a span named `span_prefix` + the target agent answers the tool named
    `tool_prefix` + the target in function style (lower case; every character but a
    letter, a digit or `_` written `_`)."""

    span_prefix: str
    tool_prefix: str


HANDOFFS = (HandoffRule("handoff to ", "transfer_to_"),)
"""OpenInference's OpenAI Agents SDK instrumentation: the handoff the model requested as
tool `transfer_to_billing` is the span "handoff to billing" (a TOOL span without the call's
id)."""


@dataclass(frozen=True, slots=True)
class FinalAnswerRule:
    """A tool a framework has the model call with its final answer: a call of `tool` in a
    model's output is the answer (its `argument`, the answer's text), not a tool call."""

    tool: str
    argument: str


FINAL_ANSWERS = (FinalAnswerRule("final_answer", "answer"),)
"""smolagents asks the model for its final answer as a call of the `final_answer` tool
(`{"answer": ...}`); it runs it as a tool span `FinalAnswerTool`."""
FINAL_ANSWER_TOOLS = frozenset(rule.tool for rule in FINAL_ANSWERS)
