"""Attribute and event names: OpenTelemetry GenAI semantic conventions and pathgrade's own.

One place for every name, so no module spells an attribute key by hand.

Sources: open-telemetry/semantic-conventions `model/gen-ai/registry.yaml`,
`model/gen-ai/deprecated/registry-deprecated.yaml`, `model/gen-ai/events.yaml` (the GenAI
conventions have since moved to open-telemetry/semantic-conventions-genai: the version
implemented is `GENAI_CONVENTIONS`); OpenInference (Arize-ai/openinference,
openinference-semantic-conventions); OpenLLMetry (traceloop/openllmetry,
opentelemetry-semantic-conventions-ai).
"""

from __future__ import annotations

from typing import Final

GENAI_CONVENTIONS: Final = (
    "open-telemetry/semantic-conventions-genai, main as of 2026-10 (Unreleased: operations "
    "invoke_agent, invoke_workflow; user.id on invoke_agent), with pull request #535 as "
    "proposed (commit 1572d33, not merged): the gen_ai.tool.call.decision event"
)
"""The GenAI conventions this module implements: pinned, since every `gen_ai.*` item is in
development and may still change."""

# --- GenAI span attributes (current names) --------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
AGENT_VERSION: Final = "gen_ai.agent.version"
WORKFLOW_NAME: Final = "gen_ai.workflow.name"
WORKFLOW_NODES: Final = "gen_ai.workflow.nodes"  # a graph's node names (OpenLLMetry, LangGraph)
WORKFLOW_EDGES: Final = "gen_ai.workflow.edges"  # its edges as "source -> target" strings
TASK_NAME: Final = "gen_ai.task.name"
TASK_INPUT: Final = "gen_ai.task.input"  # OpenLLMetry's copy of a step's input (content)
TASK_OUTPUT: Final = "gen_ai.task.output"  # and of its output
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
ERROR_TYPE: Final = "error.type"
ERROR_TYPE_OTHER: Final = "_OTHER"  # the convention's fallback value for error.type

# --- GenAI operation names (values of gen_ai.operation.name) --------------------------------
OP_CHAT: Final = "chat"
OP_TEXT_COMPLETION: Final = "text_completion"
OP_GENERATE_CONTENT: Final = "generate_content"
OP_EMBEDDINGS: Final = "embeddings"
OP_RETRIEVAL: Final = "retrieval"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CREATE_AGENT: Final = "create_agent"
OP_INVOKE_WORKFLOW: Final = "invoke_workflow"
OP_HANDLE_CONVERSATION_TURN: Final = "handle_conversation_turn"  # a turn handler's own span
OPERATIONS: Final = frozenset(
    {
        OP_CHAT,
        OP_TEXT_COMPLETION,
        OP_GENERATE_CONTENT,
        OP_EMBEDDINGS,
        OP_RETRIEVAL,
        OP_EXECUTE_TOOL,
        OP_INVOKE_AGENT,
        OP_CREATE_AGENT,
        OP_INVOKE_WORKFLOW,
    }
)
# Operations that call a model (the span's target in "{operation} {target}" is the model).
MODEL_OPERATIONS: Final = frozenset(
    {OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT, OP_EMBEDDINGS}
)

# --- Deprecated GenAI attributes (every rename: schemas.genai_versions) ---------------------
SYSTEM_DEPRECATED: Final = "gen_ai.system"
USAGE_PROMPT_TOKENS_DEPRECATED: Final = "gen_ai.usage.prompt_tokens"
USAGE_COMPLETION_TOKENS_DEPRECATED: Final = "gen_ai.usage.completion_tokens"
# Removed without replacement (the registry points to events); content when present.
PROMPT_DEPRECATED: Final = "gen_ai.prompt"
COMPLETION_DEPRECATED: Final = "gen_ai.completion"

# --- GenAI event names ----------------------------------------------------------------------
EVENT_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
EVENT_CONTENT_PROMPT: Final = "gen_ai.content.prompt"  # deprecated span event
EVENT_CONTENT_COMPLETION: Final = "gen_ai.content.completion"  # deprecated span event
EVENT_SYSTEM_MESSAGE: Final = "gen_ai.system.message"
EVENT_USER_MESSAGE: Final = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE: Final = "gen_ai.assistant.message"
EVENT_TOOL_MESSAGE: Final = "gen_ai.tool.message"
EVENT_CHOICE: Final = "gen_ai.choice"
# The attributes of a `gen_ai.evaluation.result` event (model/gen-ai/events.yaml; the name
# is required, the others set when they apply; `error.type` when the evaluation failed).
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
# Proposed in semantic-conventions-genai pull request #535 (not merged): an explicit decision
# on a proposed tool call before it runs, correlated by gen_ai.tool.call.id.
EVENT_TOOL_CALL_DECISION: Final = "gen_ai.tool.call.decision"
TOOL_CALL_DECISION_OUTCOME: Final = "gen_ai.tool.call.decision.outcome"
DECISION_ALLOW: Final = "allow"
DECISION_DENY: Final = "deny"
DECISION_REQUIRE_APPROVAL: Final = "require_approval"
DECISION_OUTCOMES: Final = frozenset({DECISION_ALLOW, DECISION_DENY, DECISION_REQUIRE_APPROVAL})
CONTENT_EVENTS: Final = frozenset(
    {
        EVENT_INFERENCE_DETAILS,
        EVENT_CONTENT_PROMPT,
        EVENT_CONTENT_COMPLETION,
        EVENT_SYSTEM_MESSAGE,
        EVENT_USER_MESSAGE,
        EVENT_ASSISTANT_MESSAGE,
        EVENT_TOOL_MESSAGE,
        EVENT_CHOICE,
    }
)

# --- Resource and general attributes --------------------------------------------------------
SERVICE_NAME: Final = "service.name"
ENDUSER_ID: Final = "enduser.id"

# --- pathgrade's own attributes (DESIGN.md "pathgrade.*", on the root span) ------------------
PG_DATASET_ITEM_ID: Final = "pathgrade.dataset.item_id"
PG_RUN_ID: Final = "pathgrade.run.id"
PG_REPLAY_INDEX: Final = "pathgrade.replay.index"
PG_VARIANT_ID: Final = "pathgrade.variant.id"
PG_SUITE_VERSION: Final = "pathgrade.suite.version"
PG_TOOL_EFFECT: Final = "pathgrade.tool.effect"
PG_TURN_KIND: Final = "pathgrade.turn.kind"
PG_IDEMPOTENCY_KEY: Final = "pathgrade.idempotency_key"
PG_CONFIRMED_ACTION: Final = "pathgrade.confirmed_action"
PG_REDACTED_KEYS: Final = "pathgrade.redacted.keys"  # set by the collector's redaction
PG_FEEDBACK: Final = "pathgrade.feedback"  # the user's feedback on a turn (any span)
NEGATIVE_FEEDBACK: Final = frozenset({"negative", "thumbs_down", "bad"})
"""Values of pathgrade.feedback that are negative (case-insensitive); so is a number below 0."""
MANIFEST_SPAN: Final = "pathgrade.edge.run"  # the span an EDGE run records its manifest on
MANIFEST_ATTRIBUTE: Final = "pathgrade.edge.manifest"  # that span's manifest (JSON)
PG_FACTS_PREFIX: Final = "pathgrade.facts."  # facts the collector computes (schemas.facts)
TOOL_EFFECTS: Final = ("read", "write", "irreversible")  # values of pathgrade.tool.effect
TURN_KINDS: Final = ("action", "read")  # values of pathgrade.turn.kind

# --- OpenInference (Arize) ------------------------------------------------------------------
OI_SPAN_KIND: Final = "openinference.span.kind"
OI_SPAN_KIND_TOOL: Final = "TOOL"  # value of openinference.span.kind on tool spans
OI_SPAN_KIND_CHAIN: Final = "CHAIN"
OI_SPAN_KIND_LLM: Final = "LLM"
OI_INPUT_VALUE: Final = "input.value"
OI_OUTPUT_VALUE: Final = "output.value"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_DESCRIPTION: Final = "tool.description"
OI_TOOL_PARAMETERS: Final = "tool.parameters"
OI_TOOL_CALL_ID: Final = "tool_call.id"
OI_TOOL_CALL_FUNCTION_NAME: Final = "tool_call.function.name"
OI_TOOL_CALL_FUNCTION_ARGUMENTS: Final = "tool_call.function.arguments"
OI_LLM_MODEL_NAME: Final = "llm.model_name"
OI_LLM_REQUEST_MODEL_NAME: Final = "llm.request.model_name"
OI_LLM_RESPONSE_MODEL_NAME: Final = "llm.response.model_name"
OI_LLM_FINISH_REASON: Final = "llm.finish_reason"
OI_TOOL_ID: Final = "tool.id"
OI_LLM_PROVIDER: Final = "llm.provider"
OI_LLM_SYSTEM: Final = "llm.system"
OI_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
OI_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
OI_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
OI_SESSION_ID: Final = "session.id"
TL_SESSION_ID: Final = "traceloop.association.properties.session_id"
OI_USER_ID: Final = "user.id"
TL_USER_ID: Final = "traceloop.association.properties.user_id"
OI_AGENT_NAME: Final = "agent.name"
OI_METADATA: Final = "metadata"  # JSON text; LangGraph puts `langgraph_node` in it
OI_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
OI_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."

# --- OpenLLMetry (Traceloop) ----------------------------------------------------------------
TL_SPAN_KIND: Final = "traceloop.span.kind"
TL_SPAN_KIND_TOOL: Final = "tool"  # value of traceloop.span.kind on tool spans
TL_ENTITY_NAME: Final = "traceloop.entity.name"
TL_ENTITY_INPUT: Final = "traceloop.entity.input"
TL_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TL_WORKFLOW_NAME: Final = "traceloop.workflow.name"
TL_LANGGRAPH_NODE: Final = "traceloop.association.properties.langgraph_node"
TL_LLM_REQUEST_TYPE: Final = "llm.request.type"
TL_LLM_REQUEST_MODEL: Final = "llm.request.model"
TL_LLM_RESPONSE_MODEL: Final = "llm.response.model"
TL_LLM_USAGE_PROMPT_TOKENS: Final = "llm.usage.prompt_tokens"
TL_LLM_USAGE_COMPLETION_TOKENS: Final = "llm.usage.completion_tokens"
TL_LLM_USAGE_TOTAL_TOKENS: Final = "llm.usage.total_tokens"
TL_PROMPT_PREFIX: Final = "gen_ai.prompt."
TL_COMPLETION_PREFIX: Final = "gen_ai.completion."
TL_REQUEST_FUNCTIONS_PREFIX: Final = "llm.request.functions."

# --- Content attributes (what the collector's redaction removes) -----------------------------
# Tool-call payloads: arguments passed to a tool and what it returned.
TOOL_CONTENT_KEYS: Final = frozenset(
    {
        TOOL_CALL_ARGUMENTS,
        TOOL_CALL_RESULT,
        OI_TOOL_PARAMETERS,
        OI_TOOL_CALL_FUNCTION_ARGUMENTS,
    }
)
# Messages, prompts and generic inputs/outputs. `input.value`/`output.value` and
# `traceloop.entity.input|output` also carry tool arguments/results on tool spans; they are
# classed here because the key alone does not say which.
MESSAGE_CONTENT_KEYS: Final = frozenset(
    {
        INPUT_MESSAGES,
        OUTPUT_MESSAGES,
        SYSTEM_INSTRUCTIONS,
        PROMPT_DEPRECATED,
        COMPLETION_DEPRECATED,
        RETRIEVAL_DOCUMENTS,
        RETRIEVAL_QUERY_TEXT,
        OI_INPUT_VALUE,
        OI_OUTPUT_VALUE,
        "llm.prompts",
        "llm.prompt_template.template",
        "llm.prompt_template.variables",
        TL_ENTITY_INPUT,
        TL_ENTITY_OUTPUT,
        TASK_INPUT,
        TASK_OUTPUT,
    }
)
MESSAGE_CONTENT_PREFIXES: Final = (
    TL_PROMPT_PREFIX,
    TL_COMPLETION_PREFIX,
    OI_INPUT_MESSAGES_PREFIX,
    OI_OUTPUT_MESSAGES_PREFIX,
    "llm.prompts.",
    "llm.choices.",
    "retrieval.documents.",
    "reranker.input_documents.",
    "reranker.output_documents.",
    "embedding.embeddings.",
)
# The session's identity in every convention (conventions.session_identity reads them in
# this order): personal data, which the collector keeps only when told to.
IDENTITY_KEYS: Final = (ENDUSER_ID, OI_USER_ID, TL_USER_ID)
IDENTITY_KEY_SET: Final = frozenset(IDENTITY_KEYS)
# A confirmed action holds the arguments of a tool call: kept when that tool's are.
PRIVATE_KEYS: Final = IDENTITY_KEY_SET | {PG_CONFIRMED_ACTION}
CONTENT_KEYS: Final = TOOL_CONTENT_KEYS | MESSAGE_CONTENT_KEYS | PRIVATE_KEYS


def is_content_key(key: str) -> bool:
    """True when the attribute `key` holds message or tool content, or the session's
    identity (what the collector drops unless captured, and the store keeps briefly)."""
    return key in CONTENT_KEYS or key.startswith(MESSAGE_CONTENT_PREFIXES)
