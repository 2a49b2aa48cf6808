"""Map the attributes of one span, whatever convention wrote them, onto the GenAI view.

`genai_fields(span_name, attributes)` (and its content part, `content_fields`) reads the
current OpenTelemetry GenAI names first, then deprecated GenAI aliases, then OpenInference
(Arize) and OpenLLMetry (Traceloop) names, then the span name. The first non-empty value
in each chain wins. It is pure over its inputs and runs once per span on the hot path:
dict lookups only, no regex; the flattened message keys are scanned only on model-call
spans without `gen_ai.*.messages`.

field            sources, highest precedence first
---------------  ----------------------------------------------------------------------------
operation        gen_ai.operation.name; openinference.span.kind (LLM->chat,
                 TOOL->execute_tool, AGENT->invoke_agent, CHAIN->chain, RETRIEVER->retrieval,
                 EMBEDDING->embeddings, RERANKER->rerank, GUARDRAIL->guardrail,
                 EVALUATOR->evaluator, PROMPT->prompt, other->lowercased);
                 traceloop.span.kind (workflow->invoke_agent, agent->invoke_agent,
                 tool->execute_tool, task->task); llm.request.type (chat->chat,
                 completion->text_completion, embedding(s)->embeddings, rerank->rerank);
                 first word of the span name when it is a GenAI operation
provider_name    gen_ai.provider.name; gen_ai.system (deprecated); llm.provider; llm.system
agent_name       gen_ai.agent.name; agent.name; traceloop.entity.name on workflow/agent
                 spans; span-name target of invoke_agent/create_agent
agent_id         gen_ai.agent.id
tool_name        gen_ai.tool.name; tool.name; traceloop.entity.name on tool spans;
                 span-name target of execute_tool
tool_call_id     gen_ai.tool.call.id; tool_call.id; tool.id
tool_type        gen_ai.tool.type
tool_arguments   gen_ai.tool.call.arguments; on execute_tool spans: input.value,
                 traceloop.entity.input (read through `predicates.call_arguments`: a
                 Python call's {"args": [], "kwargs": {...}} and OpenLLMetry's LangChain
                 {"input_str", "inputs": {...}} hold the arguments)
tool_result      gen_ai.tool.call.result; on execute_tool spans: output.value,
                 traceloop.entity.output
conversation_id  gen_ai.conversation.id; session.id; traceloop.association.properties.session_id
request_model    gen_ai.request.model; llm.request.model_name; llm.model_name;
                 llm.request.model; span-name target of a model operation
response_model   gen_ai.response.model; llm.response.model_name; llm.response.model
input_tokens     gen_ai.usage.input_tokens; gen_ai.usage.prompt_tokens (deprecated);
                 llm.token_count.prompt; llm.usage.prompt_tokens
output_tokens    gen_ai.usage.output_tokens; gen_ai.usage.completion_tokens (deprecated);
                 llm.token_count.completion; llm.usage.completion_tokens
total_tokens     llm.token_count.total; llm.usage.total_tokens; input + output when both known
error_type       error.type only (see below)
input_messages   gen_ai.input.messages; on chat/text_completion/generate_content spans:
                 llm.input_messages.N.*; gen_ai.prompt.N.*; gen_ai.prompt (deprecated);
                 input.value on OpenInference LLM spans
output_messages  gen_ai.output.messages; on those spans: llm.output_messages.N.*;
                 gen_ai.completion.N.*; gen_ai.completion; output.value on OpenInference LLM
finish_reasons   gen_ai.response.finish_reasons; llm.finish_reason; finish_reason of the
                 flattened output messages
session identity enduser.id; user.id (OpenInference, and the conventions' own on invoke_agent);
                 traceloop.association.properties.user_id (OpenLLMetry association
                 properties); read by `session_identity`, not a GenAI field (the collector
                 keeps its fingerprint, pathgrade.facts.session.fp)

Turns (`content.agent_turns`; read by `is_agent_entry` and `handoff_tool_names`, not GenAI
fields):
agent entry      operation (as above) or the span name's first word in invoke_agent,
                 invoke_workflow, handle_conversation_turn (OpenInference AGENT and
                 OpenLLMetry workflow / agent spans map to invoke_agent); a span named
                 "agent run" without an operation (Pydantic AI, instrumentation version 2
                 and before); an OpenInference
                 CHAIN span whose `metadata` says `"ls_integration": "langgraph"` and names no
                 `langgraph_node` (LangGraph's graph root); an OpenInference CHAIN span
                 named `<...Agent or AgentWorkflow>.run` (LlamaIndex's workflow agents)
model helper     an OpenInference LLM span named after a private method (`<class>._<name>`,
                 LlamaIndex's `OpenAI._prepare_chat_with_tools`) that reports no token
                 usage calls no model: no detector reads it as a model call
handoff          a span named "handoff to <agent>" (OpenInference, OpenAI Agents SDK) answers
                 the tool call `transfer_to_<agent in function style>` that requested it
                 (it is no tool call itself)
final answer     a model's call of `final_answer` (smolagents) is its answer, the call's
                 `answer` argument its text, not a tool call (`messages.answer_text`,
                 `messages.requested_calls`)
tool decision    span event `gen_ai.tool.call.decision` (semantic-conventions-genai pull
                 request #535, proposed, not merged): `gen_ai.tool.call.decision.outcome`
                 allow / deny / require_approval, `gen_ai.tool.call.id`, `gen_ai.tool.name`;
                 read by `content.events.tool_call_decisions`

Decisions:
- The span-name target ("chat gpt-4o" -> "gpt-4o") fills the model / tool / agent name only
  when the name's first word equals the span's operation and the field is otherwise empty.
- OpenInference CHAIN and OpenLLMetry task are generic steps, not agents: they keep their
  own operation names ("chain", "task"). An OpenLLMetry workflow is the agent's entry point,
  so it maps to invoke_agent with `traceloop.entity.name` as the agent name. A span that
  says `gen_ai.operation.name = invoke_workflow` keeps it.
- OpenInference `tool.parameters` is the tool's parameter schema, not the call's arguments,
  so it is not mapped (it is still a content key for redaction).
- Flattened messages (`llm.input_messages.N.message.*`, `gen_ai.prompt.N.*`, ...) become GenAI
  JSON: `[{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "id", "name",
  "arguments"}, {"type": "tool_call_response", "id", "response"}], "finish_reason"?}]`.
  Tool-call arguments that are JSON text are parsed into the part; other text stays text.
- Token counts accept ints, integral floats and numeric ASCII strings from 0 to 2^64-1
  (the store's UInt64); anything else, a negative count or "²" included, is treated as
  absent (telemetry from the field must not make a span undecodable or unstorable; the
  attribute itself stays in the span's attributes as sent). The same holds for
  `pathgrade.replay.index` up to 2^32-1, and a flattened message key whose index is not
  ASCII digits (`gen_ai.prompt.².content`) is not read as a message. All conversions go
  through `content.numbers`, which never raises.
- Non-string values of text fields (arrays, maps) are serialised as JSON text.
- error_type is read from `error.type` only, so the function stays pure over attributes. A
  span with status Error and no `error.type` is the caller's business: `content.otlp` then
  sets "_OTHER", the convention's fallback value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from pathgrade.content.memo import BoundedMemo
from pathgrade.content.numbers import integral, parse_index
from pathgrade.schemas import genai as g
from pathgrade.schemas import genai_mapping as m
from pathgrade.schemas.genai_mapping import MESSAGE_FALLBACK_KEYS, TOKEN_KEYS
from pathgrade.schemas.model import EvalContext, GenAIFields, Span


def genai_fields(span_name: str, attributes: Mapping[str, Any]) -> GenAIFields:
    """The GenAI view of a span from its name and attributes (see the module table)."""
    fields = content_fields(span_name, attributes)
    get = attributes.get
    traceloop_kind = _text(get(g.TL_SPAN_KIND))  # text: a list is no kind (nor hashable)
    operation = fields.operation
    name_operation, _, name_target = span_name.partition(" ")
    target = name_target if name_operation == operation else ""

    agent_name, tool_name, request_model = _names(
        attributes, _text(get(g.TL_ENTITY_NAME)), traceloop_kind, operation, target
    )

    if TOKEN_KEYS.isdisjoint(attributes):  # no usage (every span but model calls)
        input_tokens = output_tokens = total_tokens = None
    else:
        input_tokens = _token_count(_first(attributes, m.INPUT_TOKEN_KEYS))
        output_tokens = _token_count(_first(attributes, m.OUTPUT_TOKEN_KEYS))
        total_tokens = _token_count(_first(attributes, m.TOTAL_TOKEN_KEYS))
        if total_tokens is None and input_tokens is not None and output_tokens is not None:
            total_tokens = _token_count(input_tokens + output_tokens)

    fields.provider_name = _first_text(attributes, m.PROVIDER_KEYS)
    fields.agent_name = agent_name
    fields.agent_id = _text(get(g.AGENT_ID))
    fields.tool_name = tool_name
    fields.tool_call_id = _first_text(attributes, m.TOOL_CALL_ID_KEYS)
    fields.tool_type = _text(get(g.TOOL_TYPE))
    fields.conversation_id = _first_text(attributes, m.CONVERSATION_KEYS)
    fields.request_model = request_model
    fields.response_model = _first_text(attributes, m.RESPONSE_MODEL_KEYS)
    fields.input_tokens = input_tokens
    fields.output_tokens = output_tokens
    fields.total_tokens = total_tokens
    fields.error_type = _text(get(g.ERROR_TYPE))
    return fields


def _names(
    attributes: Mapping[str, Any], entity_name: str, traceloop_kind: str, operation: str,
    target: str,
) -> list[str]:  # fmt: skip
    """The name-like fields as `genai_mapping.NAME_RULES` read them (agent name, tool
    name, request model), from the attributes, `traceloop.entity.name`,
    `traceloop.span.kind`, the operation and the span name's target."""
    names = []
    for rule in m.NAME_RULES:
        found = _first_text(attributes, rule.keys)
        if not found and traceloop_kind in rule.entity_kinds:
            found = entity_name
        if not found and operation in rule.target_operations:
            found = target
        names.append(found)
    return names


def content_fields(span_name: str, attributes: Mapping[str, Any]) -> GenAIFields:
    """The part of the GenAI view that content decides (operation, tool arguments and
    result, input and output messages, finish reasons), the other fields left empty:
    what facts read (`content.facts_producer`), at a fraction of `genai_fields`' cost."""
    fields, rebuilt = content_view(span_name, attributes, input_arguments=True)
    if rebuilt.inputs:
        fields.input_messages = _messages_json(rebuilt.inputs)
    if rebuilt.outputs:
        fields.output_messages = _messages_json(rebuilt.outputs)
    return fields


class RebuiltMessages(NamedTuple):
    """A model call's input and output messages rebuilt from flattened keys, as GenAI
    message objects whose values JSON holds (what parsing their JSON text gives, tool-call
    arguments kept in the outputs, in the inputs only when asked for); [] for messages
    that were not flattened."""

    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]


NOT_REBUILT: Final = RebuiltMessages([], [])


ContentView = tuple[GenAIFields, RebuiltMessages]
"""`content_fields` before rebuilt messages are written as JSON: the fields (their
`input_messages` / `output_messages` "" where the rebuilt messages hold them) and the
rebuilt messages, which facts read as they are (no JSON round trip). A plain tuple: one is
made per span facts read."""


def content_view(
    span_name: str, attributes: Mapping[str, Any], input_arguments: bool = False
) -> ContentView:
    """The content part of the GenAI view, with flattened messages left as objects: the
    output messages' tool calls with their `arguments` (facts fingerprint the calls a model
    requested), the input messages' only when asked for (`input_arguments`)."""
    get = attributes.get
    operation = _operation(attributes)
    name_operation = span_name.partition(" ")[0]
    if not operation and name_operation in g.OPERATIONS:
        operation = name_operation

    tool_arguments = _text(get(m.TOOL_ARGUMENTS.key))
    tool_result = _text(get(m.TOOL_RESULT.key))
    if operation == g.OP_EXECUTE_TOOL:
        tool_arguments = tool_arguments or _first_text(attributes, m.TOOL_ARGUMENTS.fallback_keys)
        tool_result = tool_result or _first_text(attributes, m.TOOL_RESULT.fallback_keys)

    input_messages = _text(get(m.INPUT_MESSAGES.key))
    output_messages = _text(get(m.OUTPUT_MESSAGES.key))
    finish_reasons = _string_list(_first(attributes, m.FINISH_REASON_KEYS))
    rebuilt = NOT_REBUILT
    if operation in m.MESSAGE_OPERATIONS and not (input_messages and output_messages):
        (input_messages, output_messages), rebuilt, flattened_reasons = _messages_without_keys(
            attributes, (input_messages, output_messages), input_arguments
        )
        finish_reasons = finish_reasons or flattened_reasons

    fields = GenAIFields(
        operation=operation,
        tool_arguments=tool_arguments,
        tool_result=tool_result,
        input_messages=input_messages,
        output_messages=output_messages,
        finish_reasons=finish_reasons,
    )
    return fields, rebuilt


def session_identity(attributes: Mapping[str, Any]) -> str:
    """The session's identity (the end user) in any convention, "" when none is set."""
    if g.IDENTITY_KEY_SET.isdisjoint(attributes):  # most spans: no identity (one C-level test)
        return ""
    return _first_text(attributes, g.IDENTITY_KEYS)


def is_agent_entry(span_name: str, operation: str, attributes: Mapping[str, Any]) -> bool:
    """Whether a span runs an agent (the "agent entry" row of the module table): the
    outermost such span of a service is the top of a turn."""
    if operation in m.TURN_OPERATIONS:
        return True
    if not operation:  # a name's GenAI operation is its operation already; not this one's
        return span_name.partition(" ")[0] in m.TURN_OPERATIONS or span_name in m.AGENT_SPAN_NAMES
    rule = m.LANGGRAPH_ROOT
    if operation != _GRAPH_ROOT_OPERATION:
        return False
    kind = attributes.get(g.OI_SPAN_KIND)
    if any(run.kind == kind and run.names(span_name) for run in m.AGENT_RUNS):
        return True
    metadata = attributes.get(rule.metadata_key)
    if not metadata:
        return False
    if isinstance(metadata, str):
        if rule.integration not in metadata or rule.node_key in metadata:
            return False  # most chain spans: decided without parsing their metadata
        metadata = json_or_text(metadata)
    return _graph_root(metadata, rule)


def is_model_helper(span_name: str, attributes: Mapping[str, Any], fields: GenAIFields) -> bool:
    """Whether a span of a model operation calls no model (the "model helper" row of the
    module table): it reports no token usage and the mapping names it a helper."""
    if fields.input_tokens is not None or fields.output_tokens is not None:
        return False
    kind = attributes.get(g.OI_SPAN_KIND)
    return any(rule.kind == kind and rule.names(span_name) for rule in m.MODEL_HELPERS)


def _graph_root(metadata: Any, rule: m.GraphRootRule) -> bool:
    return (
        isinstance(metadata, dict)
        and metadata.get(rule.integration_key) == rule.integration
        and rule.node_key not in metadata
    )


_GRAPH_ROOT_OPERATION = m.LANGGRAPH_ROOT.kind.lower()  # the operation the kind maps to
_HANDOFF_PREFIXES = tuple(rule.span_prefix for rule in m.HANDOFFS)


def handoff_tool_names(span_name: str) -> tuple[str, ...]:
    """The tools whose call a handoff span named `span_name` answers (the "handoff" row of
    the module table); () for any other span."""
    if not span_name.startswith(_HANDOFF_PREFIXES):  # most spans: one C-level test
        return ()
    return tuple(
        rule.tool_prefix + _function_style(span_name[len(rule.span_prefix) :])
        for rule in m.HANDOFFS
        if span_name.startswith(rule.span_prefix) and len(span_name) > len(rule.span_prefix)
    )


def handoff_spans(spans: Iterable[Span]) -> list[tuple[Span, tuple[str, ...]]]:
    """The handoff spans among `spans`, each with the tools whose call it answers
    (`handoff_tool_names`); most spans are turned away by one C-level test, uncalled."""
    return [
        (span, names)
        for span in spans
        if span.name.startswith(_HANDOFF_PREFIXES) and (names := handoff_tool_names(span.name))
    ]


def any_handoff_span(span_names: Iterable[str]) -> bool:
    """Whether any of `span_names` is a handoff span's (`handoff_tool_names`)."""
    return any(n.startswith(_HANDOFF_PREFIXES) and handoff_tool_names(n) for n in span_names)


def _function_style(name: str) -> str:
    """A name as the OpenAI Agents SDK writes it into a function name."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name.replace(" ", "_")).lower()


def eval_context(attributes: Mapping[str, Any]) -> EvalContext:
    """pathgrade's evaluation context from the `pathgrade.*` attributes of a span."""
    if EVAL_KEYS.isdisjoint(attributes):  # most spans: no context, skip five conversions
        return EvalContext()
    get = attributes.get
    return EvalContext(
        dataset_item_id=_text(get(g.PG_DATASET_ITEM_ID)),
        run_id=_text(get(g.PG_RUN_ID)),
        replay_index=_count(get(g.PG_REPLAY_INDEX), _MAX_UINT32),
        variant_id=_text(get(g.PG_VARIANT_ID)),
        suite_version=_text(get(g.PG_SUITE_VERSION)),
    )


EVAL_KEYS = frozenset(
    {g.PG_DATASET_ITEM_ID, g.PG_RUN_ID, g.PG_REPLAY_INDEX, g.PG_VARIANT_ID, g.PG_SUITE_VERSION}
)


def _operation(attributes: Mapping[str, Any]) -> str:
    """The operation named by attributes (`genai_mapping.OPERATION_KEY`, then
    `OPERATION_SOURCES`), or "" when none names one."""
    get = attributes.get
    operation = _text(get(m.OPERATION_KEY))
    if operation:
        return operation
    for source in m.OPERATION_SOURCES:
        value = get(source.key)
        if not value:
            continue
        kind = value if value.__class__ is str else _text(value)
        if source.upper:
            kind = kind.upper()
        operation = source.table.get(kind)
        if operation is not None:
            return operation
        if source.unknown == "lowercase":
            return "" if kind == source.unknown_value else kind.lower()
    return ""


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first key present with a non-empty value, else None."""
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _first_text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """The text of the first key present with a non-empty value, else ""."""
    for key in keys:
        value = attributes.get(key)
        if value:
            return value if value.__class__ is str else _text(value)
    return ""


def _text(value: Any) -> str:
    """A text field from an attribute value: str as is, containers as JSON, None as ""."""
    if value.__class__ is str:
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=str)
    return str(value)


def _token_count(value: Any) -> int | None:
    """A token count: `_count` up to the largest UInt64 (the store's column type)."""
    return _count(value, _MAX_UINT64)


def _count(value: Any, upper: int) -> int | None:
    """A count in 0..`upper` from an int, an integral float or a numeric string; None
    otherwise (a negative or too large count from the field is treated as absent)."""
    number = integral(value)
    return number if number is not None and 0 <= number <= upper else None


_MAX_UINT32 = 2**32 - 1
_MAX_UINT64 = 2**64 - 1


def _string_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return [str(value)]


_Collected = dict[str, dict[int, dict[str, Any]]]
"""Flattened message leaves by key prefix, then message index."""


def _flattened_messages(attributes: Mapping[str, Any]) -> _Collected:
    """The OpenInference/OpenLLMetry flattened message keys' leaves, collected."""
    collected: _Collected = {}
    for key, value in attributes.items():
        path = _FLATTENED_PATHS.get(key)
        if path is None:
            path = _FLATTENED_PATHS.put(key, _flattened_path(key))
        if path:
            _collect_leaf(collected.setdefault(path[0], {}), path, value)
    return collected


def _messages_without_keys(
    attributes: Mapping[str, Any], texts: tuple[str, str], input_arguments: bool
) -> tuple[list[str], RebuiltMessages, list[str]]:
    """The input and output messages of a model call that lacks one of them (`texts`:
    what their keys hold) as `genai_mapping.MESSAGES_RULES` read them: flattened (rebuilt,
    their text then "", tool-call arguments in the outputs and, with `input_arguments`,
    the inputs), then the deprecated key, then OpenInference's; and the flattened outputs'
    finish reasons."""
    if MESSAGE_FALLBACK_KEYS.isdisjoint(attributes):  # content dropped: nothing to rebuild
        return list(texts), NOT_REBUILT, []
    get = attributes.get
    probed = _first(attributes, m.FLATTENED_PROBE_KEYS) is not None
    collected = _flattened_messages(attributes) if probed else {}
    found, rebuilt, reasons = [], [], []
    for rule, text in zip(m.MESSAGES_RULES, texts, strict=True):
        arguments = input_arguments or rule is m.OUTPUT_MESSAGES
        flattened = _flattened_of(collected, rule, arguments) if collected else []
        if flattened and rule.finish_reasons:
            reasons = [
                message["finish_reason"] for message in flattened if "finish_reason" in message
            ]
        used = [] if text else flattened
        if not used:
            text = text or _text(get(rule.deprecated_key))
            if not text and get(g.OI_SPAN_KIND) == rule.openinference_kind:
                text = _text(get(rule.openinference_key))
        found.append(text)
        rebuilt.append(used)
    return found, RebuiltMessages(*rebuilt), reasons


def _flattened_of(
    collected: _Collected, rule: m.MessagesRule, arguments: bool
) -> list[dict[str, Any]]:
    """GenAI messages rebuilt from the first of `rule`'s prefixes that yielded any (keys
    whose index is no number yield none, so they never hide another convention's)."""
    for prefix in rule.flattened_prefixes:
        if collected.get(prefix):
            messages = sorted(collected[prefix].items())
            return [_genai_message(leaves, arguments) for _, leaves in messages]
    return []


_FlattenedPath = tuple[str, int | None, tuple[str, ...], int | None]
"""(prefix, message index or None, leaf segments, item index or None) of a flattened
message key; the item index is that of a leaf in an indexed list ("tool_calls.0.name")."""


# Flattened paths by key: keys repeat span after span (a few per message index), so each
# is split once.
_FLATTENED_PATHS: BoundedMemo[str, _FlattenedPath | tuple[()]] = BoundedMemo(4096)


def _flattened_path(key: str) -> _FlattenedPath | tuple[()]:
    """Where a flattened key's leaf goes ("llm.input_messages.0.message.role" ->
    (prefix, 0, ("role",), None)); () when the key is no flattened message key."""
    if not key.startswith(m.FLATTENED_PREFIXES):
        return ()
    prefix = next(p for p in m.FLATTENED_PREFIXES if key.startswith(p))
    segments = [s for s in key[len(prefix) :].split(".") if s not in m.NAMESPACE_SEGMENTS]
    index = parse_index(segments[0]) if len(segments) >= 2 else None
    leaf = tuple(segments[1:])
    item = parse_index(leaf[1]) if len(leaf) == 3 and leaf[0] in m.INDEXED_LISTS else None
    return prefix, index, leaf, item


def _collect_leaf(messages: dict[int, dict[str, Any]], path: _FlattenedPath, value: Any) -> None:
    """Store one flattened leaf (path of "0.message.role", "1.tool_calls.0.name", ...) in
    `messages`."""
    _, index, leaf, item = path
    if index is None:
        return  # not a message index ("gen_ai.prompt.².content"): the attribute stays text
    message = messages.setdefault(index, {})
    if len(leaf) == 1:
        message[leaf[0]] = value
    elif item is not None:
        message.setdefault(leaf[0], {}).setdefault(item, {})[leaf[2]] = value


def _genai_message(flat: dict[str, Any], arguments: bool) -> dict[str, Any]:
    """One GenAI-convention message from its collected flattened fields (its tool calls'
    `arguments` when asked for)."""
    role = _text(flat.get("role"))
    content = _json_value(flat.get("content"))
    parts: list[dict[str, Any]] = []
    if role == "tool" and flat.get("tool_call_id"):
        parts.append(
            {
                "type": "tool_call_response",
                "id": _json_value(flat["tool_call_id"]),
                "response": content,
            }
        )
    elif content not in (None, ""):
        parts.append({"type": "text", "content": content})
    for _, item in sorted(flat.get("contents", {}).items()):
        if item.get("type", "text") == "text" and "text" in item:
            parts.append({"type": "text", "content": _json_value(item["text"])})
    for _, call in sorted(flat.get("tool_calls", {}).items()):
        part = {"type": "tool_call", "id": _text(call.get("id")), "name": _text(call.get("name"))}
        if arguments or part["name"] in m.FINAL_ANSWER_TOOLS:  # a final answer: its text
            part["arguments"] = _json_value(json_or_text(call.get("arguments")))
        parts.append(part)
    message: dict[str, Any] = {"role": role, "parts": parts}
    if "finish_reason" in flat:
        message["finish_reason"] = _text(flat["finish_reason"])
    return message


def _json_value(value: Any) -> Any:
    """An attribute value as its JSON text (`_messages_json`) reads back: bytes as text,
    in lists and maps too; other values as they are."""
    if value.__class__ is str:
        return value
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value


def json_or_text(value: Any) -> Any:
    """A JSON text decoded, other text (and non-text values) as they are."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _messages_json(messages: list[dict[str, Any]]) -> str:
    """JSON text of rebuilt messages; values JSON has no type for (bytes) become text."""
    return json.dumps(messages, default=_text)
