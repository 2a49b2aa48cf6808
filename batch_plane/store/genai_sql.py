"""The GenAI view of a span as ClickHouse SQL, compiled from `schemas.genai_mapping`.

`genai_sql(attr, ...)` gives one SQL expression per GenAI and evaluation column of the
`spans` table, the same fields `content.conventions.genai_fields` / `eval_context` compute
in Python, from the same key chains and operation tables. `attr` spells the SQL of one
attribute of the span: its text (`text(key)`, "" when absent), its OTLP value kind
(`kind(key)`: "string_value", "int_value", ..., "" when absent or empty) and its integer
(`integer(key)`).

The SQL mapping is a fast path beside the Python one (`schemas.decline`): it decides a
span whose attributes it reads as Python does and declines the others, by reason
(`DECLINES`): flattened message keys (`FLATTENED`, found in Python before any SQL runs:
`has_flattened_keys`), a text key holding no string, a count key holding neither an int
nor ASCII digits, a span kind that is not ASCII (`declines_sql`, over the attribute arrays
`ArrayAttributeSql` reads). A declined span is mapped in Python (the store's insert path
decodes its message there: batch_plane.store.otlp_insert), so the two readers agree on
every span the SQL decides (tests/unit/batch_plane/store/test_genai_sql_parity.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from pathgrade.schemas import genai as g
from pathgrade.schemas import genai_mapping as m
from pathgrade.schemas.decline import Declined

MAX_UINT32 = 2**32 - 1
MAX_UINT64 = 2**64 - 1


class AttributeSql(Protocol):
    """How the SQL reads one attribute of the span being inserted."""

    def text(self, key: str) -> str: ...
    def kind(self, key: str) -> str: ...
    def integer(self, key: str) -> str: ...


SQL_COUNT_KEYS: frozenset[str] = frozenset(
    m.INPUT_TOKEN_KEYS + m.OUTPUT_TOKEN_KEYS + m.TOTAL_TOKEN_KEYS + (g.PG_REPLAY_INDEX,)
)
"""Keys read as counts: ints, or ASCII digit strings of at most 19 digits."""
SQL_TEXT_KEYS: frozenset[str] = frozenset(
    m.PROVIDER_KEYS + m.AGENT_NAME_KEYS + m.TOOL_NAME_KEYS + m.TOOL_CALL_ID_KEYS
    + m.TOOL_ARGUMENT_FALLBACK_KEYS + m.TOOL_RESULT_FALLBACK_KEYS + m.CONVERSATION_KEYS
    + m.REQUEST_MODEL_KEYS + m.RESPONSE_MODEL_KEYS
    + (
        g.OPERATION_NAME, g.OI_SPAN_KIND, g.TL_SPAN_KIND, g.TL_LLM_REQUEST_TYPE,
        g.TL_ENTITY_NAME, g.AGENT_ID, g.TOOL_TYPE, g.TOOL_CALL_ARGUMENTS, g.TOOL_CALL_RESULT,
        g.INPUT_MESSAGES, g.OUTPUT_MESSAGES, g.PROMPT_DEPRECATED, g.COMPLETION_DEPRECATED,
        g.ERROR_TYPE, g.PG_DATASET_ITEM_ID, g.PG_RUN_ID, g.PG_VARIANT_ID, g.PG_SUITE_VERSION,
    )
)  # fmt: skip
"""Keys read as text: strings only (other kinds take the Python path)."""

FLATTENED = Declined("flattened message keys (only the Python mapping rebuilds them)")
NOT_TEXT = Declined("a key read as text holds no string")
NOT_COUNT = Declined("a key read as a count holds neither an int nor ASCII digits")
KIND_NOT_ASCII = Declined("an OpenInference span kind that is not ASCII")
DECLINES = (FLATTENED, NOT_TEXT, NOT_COUNT, KIND_NOT_ASCII)
"""Every reason the SQL mapping declines a span for."""

ATTRIBUTE_ARRAYS = ("pg_keys", "pg_kinds", "pg_strings", "pg_ints")
"""The names of the span's attribute arrays `ArrayAttributeSql` and `declines_sql` read, which
their caller defines: keys, OTLP value kinds ("string_value", ..., "" for an empty value),
string values ("" for other kinds) and int values, in one order."""
_KEYS, _KINDS, _STRINGS, _INTS = ATTRIBUTE_ARRAYS
_COUNT_RE = "^[0-9]{0,19}$"
_NOT_ASCII_RE = r"[^\x00-\x7F]"


def has_flattened_keys(keys: Iterable[str]) -> bool:
    """Whether a span with attribute `keys` holds flattened message keys (`FLATTENED`)."""
    return any(key.startswith(m.FLATTENED_PREFIXES) for key in keys)


class ArrayAttributeSql:
    """`AttributeSql` over the span's `ATTRIBUTE_ARRAYS`: each attribute read is a named
    value of its own (`definitions`, for the caller's WITH clause), computed once per span."""

    def __init__(self) -> None:
        self.definitions: dict[str, str] = {}
        self._numbers: dict[str, int] = {}

    def _column(self, part: str, key: str, sql: str) -> str:
        number = self._numbers.setdefault(key, len(self._numbers))
        name = f"pg_{part}{number}"
        self.definitions.setdefault(name, sql)
        return name

    def text(self, key: str) -> str:
        return self._column("t", key, f"{_STRINGS}[indexOf({_KEYS}, {quote(key)})]")

    def kind(self, key: str) -> str:
        return self._column("k", key, f"toString({_KINDS}[indexOf({_KEYS}, {quote(key)})])")

    def integer(self, key: str) -> str:
        return self._column("i", key, f"{_INTS}[indexOf({_KEYS}, {quote(key)})]")


def declines_sql() -> list[tuple[Declined, str]]:
    """Each reason the SQL declines a span for (but `FLATTENED`, found before), with its
    condition over `ATTRIBUTE_ARRAYS` (true: declined)."""
    kind = f"{_STRINGS}[indexOf({_KEYS}, {quote(g.OI_SPAN_KIND)})]"
    return [
        (NOT_TEXT, f"arrayExists((k, v) -> has({_array(SQL_TEXT_KEYS)}, k) "
                   f"AND v NOT IN ('string_value', ''), {_KEYS}, {_KINDS})"),
        (NOT_COUNT, f"arrayExists((k, v, s) -> has({_array(SQL_COUNT_KEYS)}, k) "
                    "AND NOT (v IN ('int_value', '') OR (v = 'string_value' "
                    f"AND match(s, {quote(_COUNT_RE)}))), {_KEYS}, {_KINDS}, {_STRINGS})"),
        (KIND_NOT_ASCII, f"match({kind}, {quote(_NOT_ASCII_RE)})"),
    ]  # fmt: skip


def quote(text: str) -> str:
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _array(values: tuple[str, ...] | frozenset[str]) -> str:
    return "[" + ", ".join(quote(v) for v in sorted(values)) + "]"


def _lookup(table: dict[str, str], key_sql: str, default_sql: str) -> str:
    """`table[key]` in SQL, `default_sql` for other keys."""
    keys = list(table)
    values = _ordered([table[k] for k in keys])
    return f"transform({key_sql}, {_ordered(keys)}, {values}, {default_sql})"


def _ordered(values: list[str]) -> str:
    return "[" + ", ".join(quote(v) for v in values) + "]"


def _first_branches(attr: AttributeSql, keys: tuple[str, ...]) -> str:
    """multiIf branches choosing the first non-empty text of `keys`."""
    return ", ".join(f"{attr.text(k)} != '', {attr.text(k)}" for k in keys)


def first_text(attr: AttributeSql, keys: tuple[str, ...]) -> str:
    """The first non-empty text of `keys` (conventions._first_text), "" when none."""
    return f"multiIf({_first_branches(attr, keys)}, '')"


def first_count(attr: AttributeSql, keys: tuple[str, ...], upper: int) -> str:
    """The count of the first key with a value (conventions._first, _count), NULL when
    none or when that value is no count in 0..`upper` (the SQL reads ints and digit
    strings of at most 19 digits: below 2^64)."""
    branches = []
    for key in keys:
        kind, text, number = attr.kind(key), attr.text(key), attr.integer(key)
        bounded = f" AND {number} <= {upper}" if upper < MAX_UINT64 else ""
        from_text = f"toUInt64OrNull({text})"
        if upper < MAX_UINT64:
            from_text = f"if({from_text} <= {upper}, {from_text}, NULL)"
        branches.append(
            f"{kind} = 'int_value', if({number} >= 0{bounded}, toUInt64({number}), NULL), "
            f"{kind} = 'string_value' AND {text} != '', {from_text}"
        )
    return f"multiIf({', '.join(branches)}, CAST(NULL AS Nullable(UInt64)))"


@dataclass
class GenAISql:
    """The GenAI columns' SQL: `steps` are named intermediate values, in order (a step's
    values read the steps before it; the caller names each value once, so each is computed
    once), `columns` the SQL of each GenAI / evaluation column of `spans` over them."""

    steps: list[dict[str, str]]
    columns: dict[str, str]


def genai_sql(attr: AttributeSql, span_name: str, status_code: str) -> GenAISql:
    """The GenAI view in SQL, given the SQL of the span's name and status code string
    (see the module docstring)."""
    text = attr.text
    name_space = f"position({span_name}, ' ')"
    first = {
        "pg_attribute_operation": _operation(attr),
        "pg_name_operation": (
            f"if({name_space} > 0, substring({span_name}, 1, {name_space} - 1), {span_name})"
        ),
        "pg_name_target": f"if({name_space} > 0, substring({span_name}, {name_space} + 1), '')",
        "pg_input_tokens": first_count(attr, m.INPUT_TOKEN_KEYS, MAX_UINT64),
        "pg_output_tokens": first_count(attr, m.OUTPUT_TOKEN_KEYS, MAX_UINT64),
    }  # fmt: skip
    second = {
        "pg_operation": (
            "if(pg_attribute_operation = '' AND "
            f"has({_array(g.OPERATIONS)}, pg_name_operation), "
            "pg_name_operation, pg_attribute_operation)"
        )
    }
    # The sum in UInt128 (no wrap), NULL when a count is absent or the sum is past UInt64.
    # Each count is read once: the analyzer copies a step into every read of it, and
    # reading the two counts seven times cost ~0.07 s of analysis per insert.
    total_tokens = (
        f"ifNull({first_count(attr, m.TOTAL_TOKEN_KEYS, MAX_UINT64)}, "
        "accurateCastOrNull(toUInt128(pg_input_tokens) + pg_output_tokens, 'UInt64'))"
    )
    error_type = (
        f"if({text(g.ERROR_TYPE)} = '' AND {status_code} = 'Error', "
        f"{quote(g.ERROR_TYPE_OTHER)}, {text(g.ERROR_TYPE)})"
    )
    replay_index = first_count(attr, (g.PG_REPLAY_INDEX,), MAX_UINT32)
    columns = {
        "GenAIOperation": "pg_operation",
        "GenAIProvider": first_text(attr, m.PROVIDER_KEYS),
        "GenAIAgentName": _name(attr, m.AGENT_NAME),
        "GenAIAgentId": text(g.AGENT_ID),
        "GenAIToolName": _name(attr, m.TOOL_NAME),
        "GenAIToolCallId": first_text(attr, m.TOOL_CALL_ID_KEYS),
        "GenAIToolType": text(g.TOOL_TYPE),
        "GenAIToolArguments": _tool_content(attr, m.TOOL_ARGUMENTS),
        "GenAIToolResult": _tool_content(attr, m.TOOL_RESULT),
        "GenAIConversationId": first_text(attr, m.CONVERSATION_KEYS),
        "GenAIRequestModel": _name(attr, m.REQUEST_MODEL),
        "GenAIResponseModel": first_text(attr, m.RESPONSE_MODEL_KEYS),
        "GenAIInputTokens": "pg_input_tokens",
        "GenAIOutputTokens": "pg_output_tokens",
        "GenAITotalTokens": total_tokens,
        "GenAIErrorType": error_type,
        "GenAIInputMessages": _messages(attr, m.INPUT_MESSAGES),
        "GenAIOutputMessages": _messages(attr, m.OUTPUT_MESSAGES),
        "EvalDatasetItemId": text(g.PG_DATASET_ITEM_ID),
        "EvalRunId": text(g.PG_RUN_ID),
        "EvalReplayIndex": f"CAST({replay_index} AS Nullable(UInt32))",
        "EvalVariantId": text(g.PG_VARIANT_ID),
        "EvalSuiteVersion": text(g.PG_SUITE_VERSION),
    }
    return GenAISql([first, second], columns)


# The span name's target ("chat gpt-4o" -> "gpt-4o") when its first word is the operation.
_TARGET = "if(pg_name_operation = pg_operation, pg_name_target, '')"
_IS_TOOL = f"pg_operation = {quote(g.OP_EXECUTE_TOOL)}"


def _operation(attr: AttributeSql) -> str:
    """`genai_mapping.OPERATION_KEY`, then each of `OPERATION_SOURCES`, "" when none
    names an operation."""
    named = attr.text(m.OPERATION_KEY)
    branches = [f"{named} != '', {named}"]
    for source in m.OPERATION_SOURCES:
        value = attr.text(source.key)
        kind = f"upper({value})" if source.upper else value
        if source.unknown == "lowercase":
            other = f"if({kind} = {quote(source.unknown_value)}, '', lower({kind}))"
            branches.append(f"{value} != '', {_lookup(source.table, kind, other)}")
        else:
            looked_up = _lookup(source.table, kind, "''")
            branches.append(f"has({_ordered(list(source.table))}, {kind}), {looked_up}")
    return f"multiIf({', '.join(branches)}, '')"


def _name(attr: AttributeSql, rule: m.NameRule) -> str:
    """A name-like field as `rule` reads it (`genai_mapping.NameRule`)."""
    branches = [_first_branches(attr, rule.keys)]
    if rule.entity_kinds:
        entity = attr.text(g.TL_ENTITY_NAME)
        branches.append(
            f"has({_array(rule.entity_kinds)}, {attr.text(g.TL_SPAN_KIND)}) "
            f"AND {entity} != '', {entity}"
        )
    if rule.target_operations:
        branches.append(f"has({_array(rule.target_operations)}, pg_operation), {_TARGET}")
    return f"multiIf({', '.join(branches)}, '')"


def _tool_content(attr: AttributeSql, rule: m.ToolContentRule) -> str:
    """A tool call's arguments or result (`genai_mapping.ToolContentRule`)."""
    value = attr.text(rule.key)
    return f"if({value} = '' AND {_IS_TOOL}, {first_text(attr, rule.fallback_keys)}, {value})"


def _messages(attr: AttributeSql, rule: m.MessagesRule) -> str:
    """A model call's messages (`genai_mapping.MessagesRule`; the SQL never sees flattened
    message keys)."""
    text = attr.text
    value = text(rule.key)
    is_message_op = f"has({_array(m.MESSAGE_OPERATIONS)}, pg_operation)"
    both = " AND ".join(f"{text(key)} != ''" for key in m.MESSAGES_KEYS)
    deprecated = text(rule.deprecated_key)
    return (
        f"multiIf({value} != '' OR NOT {is_message_op} OR ({both}), {value}, "
        f"{deprecated} != '', {deprecated}, "
        f"{text(g.OI_SPAN_KIND)} = {quote(rule.openinference_kind)}, "
        f"{text(rule.openinference_key)}, '')"
    )
