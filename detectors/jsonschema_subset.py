"""A small JSON Schema validator for tool arguments.

Supported keywords: type, required, properties, additionalProperties (bool or schema),
items, enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength,
maxLength, pattern. Other keywords are ignored (they never cause an error).
"""

from __future__ import annotations

import re
from typing import Any

_TYPE_CHECKS: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: _is_integer(v),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def _is_integer(value: Any) -> bool:
    """JSON Schema integers include floats with no fractional part, never booleans."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def validate(instance: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every violation of `schema` by `instance`, as "<json path>: <reason>" strings."""
    errors = _type_errors(instance, schema, path)
    if errors:
        return errors
    errors += _value_errors(instance, schema, path)
    if isinstance(instance, dict):
        errors += _object_errors(instance, schema, path)
    if isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(instance):
            errors += validate(item, schema["items"], f"{path}[{index}]")
    return errors


def _type_errors(instance: Any, schema: dict[str, Any], path: str) -> list[str]:
    expected = schema.get("type")
    if expected is None:
        return []
    names = expected if isinstance(expected, list) else [expected]
    if any(_TYPE_CHECKS.get(name, lambda _: True)(instance) for name in names):
        return []
    return [f"{path}: expected {' or '.join(names)}, got {type(instance).__name__}"]


def _value_errors(instance: Any, schema: dict[str, Any], path: str) -> list[str]:
    errors = []
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{path}: {instance!r} is not one of {schema['enum']!r}")
    if "const" in schema and instance != schema["const"]:
        errors.append(f"{path}: {instance!r} is not {schema['const']!r}")
    if isinstance(instance, int | float) and not isinstance(instance, bool):
        errors += _bound_errors(instance, schema, path)
    if isinstance(instance, str):
        if "minLength" in schema and len(instance) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(instance) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], instance):
            errors.append(f"{path}: {instance!r} does not match {schema['pattern']!r}")
    return errors


def _bound_errors(value: float, schema: dict[str, Any], path: str) -> list[str]:
    checks = (
        ("minimum", lambda bound: value < bound, "less than"),
        ("maximum", lambda bound: value > bound, "greater than"),
        ("exclusiveMinimum", lambda bound: value <= bound, "not greater than"),
        ("exclusiveMaximum", lambda bound: value >= bound, "not less than"),
    )
    return [
        f"{path}: {value!r} is {words} {schema[keyword]!r}"
        for keyword, broken, words in checks
        if isinstance(schema.get(keyword), int | float) and broken(schema[keyword])
    ]


def _object_errors(instance: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    errors = [
        f"{path}: missing required property {name!r}"
        for name in schema.get("required", [])
        if name not in instance
    ]
    properties = schema.get("properties", {})
    additional = schema.get("additionalProperties", True)
    for name, value in instance.items():
        if name in properties:
            errors += validate(value, properties[name], f"{path}.{name}")
        elif additional is False:
            errors.append(f"{path}: unexpected property {name!r}")
        elif isinstance(additional, dict):
            errors += validate(value, additional, f"{path}.{name}")
    return errors


VALUE_KEYWORDS = ("enum", "const", "minimum", "maximum", "exclusiveMinimum",
                  "exclusiveMaximum", "pattern")  # fmt: skip
"""Keywords that need a value, which an argument skeleton does not hold."""
_SKELETON_TYPES: dict[str, frozenset[str]] = {
    "integer": frozenset({"integer", "number"}),
    "number": frozenset({"number"}),
    "string": frozenset({"string"}),
    "boolean": frozenset({"boolean"}),
    "null": frozenset({"null"}),
    "object": frozenset({"object"}),
    "array": frozenset({"array"}),
}


def validate_skeleton(
    skeleton: dict[str, Any], schema: dict[str, Any], path: str = "$"
) -> tuple[list[str], list[str]]:
    """What `schema` says of arguments known only by their skeleton
    (`content.predicates.argument_skeleton`): the violations the skeleton shows (types,
    required, properties, additionalProperties, items, string lengths), and the paths of
    the value keywords (VALUE_KEYWORDS) it cannot check."""
    kind = skeleton.get("type", "")
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not _SKELETON_TYPES.get(kind, frozenset()) & set(names):
            return [f"{path}: expected {' or '.join(names)}, got {kind}"], []
    errors: list[str] = []
    unchecked = [f"{path}: {k}" for k in VALUE_KEYWORDS if k in schema]
    length = skeleton.get("length")
    if kind == "string" and isinstance(length, int):
        if "minLength" in schema and length < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and length > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    if skeleton.get("truncated"):
        unchecked.append(f"{path}: beyond the skeleton's bounds")
    keys = skeleton.get("keys")
    if kind == "object" and isinstance(keys, dict):
        more_errors, more_unchecked = _skeleton_object(keys, schema, path)
        errors += more_errors
        unchecked += more_unchecked
    items = skeleton.get("items")
    if kind == "array" and isinstance(items, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(items):
            more_errors, more_unchecked = validate_skeleton(
                item, schema["items"], f"{path}[{index}]"
            )
            errors += more_errors
            unchecked += more_unchecked
    return errors, unchecked


def _skeleton_object(
    keys: dict[str, Any], schema: dict[str, Any], path: str
) -> tuple[list[str], list[str]]:
    errors = [
        f"{path}: missing required property {name!r}"
        for name in schema.get("required", [])
        if name not in keys
    ]
    unchecked: list[str] = []
    properties = schema.get("properties", {})
    additional = schema.get("additionalProperties", True)
    for name, shape in keys.items():
        sub_schema = properties.get(name, additional if isinstance(additional, dict) else None)
        if name not in properties and additional is False:
            errors.append(f"{path}: unexpected property {name!r}")
        elif isinstance(sub_schema, dict) and isinstance(shape, dict):
            more_errors, more_unchecked = validate_skeleton(shape, sub_schema, f"{path}.{name}")
            errors += more_errors
            unchecked += more_unchecked
    return errors, unchecked
