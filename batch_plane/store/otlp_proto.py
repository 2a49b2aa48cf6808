"""A self-contained `.proto` of `pathgrade.spans` message values, generated from the
`_pb2` descriptors of opentelemetry-proto (never kept by hand), for ClickHouse's own
Protobuf input format (the store writer's insert path).

ClickHouse cannot read recursive messages, so the recursion of OTLP's attribute values
(AnyValue -> ArrayValue / KeyValueList -> AnyValue) is unrolled `VALUE_DEPTH` levels deep;
at the last level the nested fields are declared `bytes`: their presence is visible (a
value nested deeper than the store's SQL reads, so the message takes the Python path),
their content is not parsed. Enums are declared as the int32 they travel as.

Each value carries two fields OTLP does not have, appended by the store writer: the
tenant (`TENANT_FIELD`) and the receive time (`RECEIVED_AT_FIELD`, ns). Protobuf readers
merge concatenated fields, so the value with them appended is still a valid TracesData.
"""

from __future__ import annotations

from functools import cache

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

VALUE_DEPTH = 2
"""Levels of attribute values read: scalars, and arrays / maps of scalars."""
TENANT_FIELD = ("pathgrade_tenant", 536_870_001)
RECEIVED_AT_FIELD = ("pathgrade_received_at", 536_870_002)
ROOT_MESSAGE = "TracesData"

_SCALARS = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32",
    FieldDescriptor.TYPE_SFIXED64: "sfixed64",
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_ENUM: "int32",
}
_RECURSIVE = frozenset({"AnyValue", "ArrayValue", "KeyValueList", "KeyValue"})


@cache
def spans_value_proto() -> str:
    """The `.proto` text (proto3) of a `pathgrade.spans` value as the store writer sends it."""
    messages: dict[str, str] = {}
    _render(TracesData.DESCRIPTOR, 0, messages)
    extra = f"  string {TENANT_FIELD[0]} = {TENANT_FIELD[1]};\n"
    extra += f"  uint64 {RECEIVED_AT_FIELD[0]} = {RECEIVED_AT_FIELD[1]};\n"
    messages[ROOT_MESSAGE] = messages[ROOT_MESSAGE].removesuffix("}\n") + extra + "}\n"
    return 'syntax = "proto3";\n\n' + "\n".join(messages.values())


_CLICKHOUSE_TYPES = {
    "string": "String", "bytes": "String", "bool": "Bool", "int64": "Int64",
    "uint64": "UInt64", "int32": "Int32", "uint32": "UInt32", "fixed64": "UInt64",
    "fixed32": "UInt32", "sfixed64": "Int64", "double": "Float64", "float": "Float32",
}  # fmt: skip


UNREAD_FIELDS = frozenset({
    "entity_refs", "dropped_attributes_count", "dropped_events_count", "dropped_links_count",
    "flags", "schema_url", "key_strindex", "string_value_strindex",
    "InstrumentationScope.attributes",
})  # fmt: skip
"""Fields (`name` or `Message.name`) the store does not read: left out of the structure,
so ClickHouse skips them."""
PRESENCE_ONLY = frozenset({"AnyValue.kvlist_value"})
"""Message fields read only for their presence (the SQL leaves such values to Python)."""


@cache
def spans_value_structure() -> str:
    """The ClickHouse structure (`input`/`file` column list) of `spans_value_proto`: the
    fields the store reads, nested messages as named Tuples, repeated ones as Arrays, and
    a oneof as an Enum8 column of its field numbers (`input_format_protobuf_oneof_presence`)."""
    columns = _columns(TracesData.DESCRIPTOR, 0)
    columns += [f"{TENANT_FIELD[0]} String", f"{RECEIVED_AT_FIELD[0]} UInt64"]
    return ", ".join(columns)


def _columns(descriptor: Descriptor, depth: int) -> list[str]:
    columns: list[str] = []
    for oneof in descriptor.oneofs:
        numbers = ", ".join(f"'{f.name}' = {f.number}" for f in oneof.fields)
        columns.append(f"{oneof.name} Enum8('' = 0, {numbers})")
    for field in descriptor.fields:
        qualified = f"{descriptor.name}.{field.name}"
        if field.name in UNREAD_FIELDS or qualified in UNREAD_FIELDS:
            continue
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            kind = _CLICKHOUSE_TYPES[_SCALARS[field.type]]
        else:
            child_depth = depth + 1 if descriptor.name == "AnyValue" else depth
            presence_only = qualified in PRESENCE_ONLY
            if descriptor.name == "AnyValue" and (child_depth >= VALUE_DEPTH or presence_only):
                kind = "String"
            else:
                kind = f"Tuple({', '.join(_columns(field.message_type, child_depth))})"
        columns.append(
            f"{field.name} Array({kind})" if field.is_repeated else f"{field.name} {kind}"
        )
    return columns


def _message_name(descriptor: Descriptor, depth: int) -> str:
    """The generated name: OTLP's own, with the nesting level for the unrolled ones."""
    if descriptor.name in _RECURSIVE and depth:
        return f"{descriptor.name}{depth}"
    return descriptor.name


def _render(descriptor: Descriptor, depth: int, messages: dict[str, str]) -> str:
    """Render `descriptor` (at attribute-value `depth`) and what it uses into `messages`."""
    name = _message_name(descriptor, depth)
    if name in messages:
        return name
    messages[name] = ""  # reserve: keeps declaration order parents-first
    lines: list[str] = []
    oneofs: dict[str, list[str]] = {}
    for field in descriptor.fields:
        lines_of = (
            oneofs.setdefault(field.containing_oneof.name, []) if field.containing_oneof else lines
        )
        lines_of.append(_field_line(descriptor, field, depth, messages))
    body = "".join(lines)
    for oneof, fields in oneofs.items():
        body += f"  oneof {oneof} {{\n" + "".join("  " + f for f in fields) + "  }\n"
    messages[name] = f"message {name} {{\n{body}}}\n"
    return name


def _field_line(
    parent: Descriptor, field: FieldDescriptor, depth: int, messages: dict[str, str]
) -> str:
    repeated = "repeated " if field.is_repeated else ""
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        kind = _SCALARS[field.type]
    else:
        child = field.message_type
        child_depth = depth + 1 if parent.name == "AnyValue" else depth
        presence_only = f"{parent.name}.{field.name}" in PRESENCE_ONLY
        if parent.name == "AnyValue" and (child_depth >= VALUE_DEPTH or presence_only):
            kind = "bytes"  # nested past what the store reads: presence only
        else:
            kind = _render(child, child_depth, messages)
    return f"  {repeated}{kind} {field.name} = {field.number};\n"
