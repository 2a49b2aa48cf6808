"""OTLP values for tests: protobuf AnyValues from Python values, OTLP/JSON ones for tests
of nesting limits."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def any_value(raw: Any) -> AnyValue:
    """An AnyValue of every OTLP type from a Python value: bool, int (past int64: its
    text, as a JSON number that big travels), float, bytes, str, list (an array), dict (a
    key-value list), an AnyValue as it is; None: no value set."""
    if isinstance(raw, AnyValue):
        return raw
    if isinstance(raw, bool):
        return AnyValue(bool_value=raw)
    if isinstance(raw, int):
        fits = -(2**63) <= raw < 2**63
        return AnyValue(int_value=raw) if fits else AnyValue(string_value=str(raw))
    if isinstance(raw, float):
        return AnyValue(double_value=raw)
    if isinstance(raw, bytes):
        return AnyValue(bytes_value=raw)
    if isinstance(raw, str):
        return AnyValue(string_value=raw)
    value = AnyValue()
    if isinstance(raw, list):
        value.array_value.values.extend(any_value(x) for x in raw)
    elif isinstance(raw, dict):
        pairs = (KeyValue(key=k, value=any_value(v)) for k, v in raw.items())
        value.kvlist_value.values.extend(pairs)
    return value


def nested_value(levels: int, kind: str, leaf: str = "x") -> dict[str, Any]:
    """An OTLP/JSON AnyValue: a string `leaf` inside `levels` arrays ("array") or
    key-value lists ("kvlist")."""
    value: dict[str, Any] = {"stringValue": leaf}
    for _ in range(levels):
        value = (
            {"arrayValue": {"values": [value]}}
            if kind == "array"
            else {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
        )
    return value
