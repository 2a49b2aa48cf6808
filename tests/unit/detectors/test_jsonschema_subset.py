"""The detectors' JSON Schema subset against the reference validator (`jsonschema`, Draft
2020-12) on every supported keyword at and around its bounds, and the skeleton check (what
PG104 decides on default privacy, from an argument skeleton) against the full check of
the arguments it was made from."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pathgrade.content.predicates import argument_skeleton
from pathgrade.detectors.jsonschema_subset import validate, validate_skeleton

VALUE_SCHEMAS: list[dict[str, Any]] = [
    {"minimum": 3}, {"maximum": 3}, {"exclusiveMinimum": 3}, {"exclusiveMaximum": 3},
    {"minimum": 2.5, "maximum": 3.5}, {"const": 3}, {"const": "b"}, {"enum": [3, "b"]},
    {"minLength": 2}, {"maxLength": 2}, {"pattern": "^a"}, {"type": "integer"},
    {"type": "number"}, {"type": ["string", "null"]}, {"type": "boolean"},
]  # fmt: skip
VALUES: list[Any] = [2, 3, 4, 2.5, 3.0, 3.5, "", "a", "ab", "abc", "b", None, True]
SHAPE_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}},
     "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "string"}},
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"type": "string", "minLength": 2}},
    {"type": "array", "items": {"type": "string", "minLength": 2}},
    {"type": "array", "items": {"type": "object", "required": ["a"]}},
    {"maxLength": 2}, {"minLength": 2},
    {"type": "string", "minLength": 2, "maxLength": 3},
]  # fmt: skip
SHAPES: list[Any] = [
    {}, {"a": "x"}, {"a": "xyz"}, {"a": 1}, {"b": 1}, {"b": "xy"}, {"a": "x", "b": 2},
    [], ["x"], ["xy", "z"], [{"a": 1}, {}], "x", "xy", "xyzw", 7, [1, 2, 3],
]  # fmt: skip


def paths(errors: list[str]) -> list[str]:
    """Where each error is (the skeleton names types as JSON does, the full check as
    Python)."""
    return [error.split(":")[0] for error in errors]


def reference_valid(instance: Any, schema: dict[str, Any]) -> bool:
    return Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize("schema", VALUE_SCHEMAS + SHAPE_SCHEMAS, ids=str)
def test_the_subset_agrees_with_the_reference_validator(schema: dict[str, Any]) -> None:
    for instance in VALUES + SHAPES:
        if isinstance(instance, bool) and ("const" in schema or "enum" in schema):
            continue  # Python's True == 1; the subset does not tell them apart in const/enum
        errors = validate(instance, schema)
        assert (errors == []) == reference_valid(instance, schema), (instance, errors)


@pytest.mark.parametrize("schema", SHAPE_SCHEMAS, ids=str)
def test_a_skeleton_shows_every_violation_of_the_shape_keywords(schema: dict[str, Any]) -> None:
    for instance in SHAPES:
        errors, unchecked = validate_skeleton(argument_skeleton(instance), schema)
        assert paths(errors) == paths(validate(instance, schema)), instance
        assert unchecked == []


def test_a_skeleton_names_the_value_keywords_it_cannot_check() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    errors, unchecked = validate_skeleton(argument_skeleton({"n": 0}), schema)
    assert errors == [] and unchecked == ["$.n: minimum"]


@pytest.mark.parametrize(
    ("skeleton", "schema"),
    [
        ({"type": "string", "keys": {"b": {"type": "string"}}}, {"additionalProperties": False}),
        ({"type": "string", "items": [{"type": "string"}]}, {"items": {"type": "integer"}}),
        ({"type": "array", "length": 9, "items": []}, {"maxLength": 2}),
    ],
    ids=["keys-of-a-string", "items-of-a-string", "length-of-an-array"],
)
def test_keys_items_and_lengths_count_only_for_their_own_kind(
    skeleton: dict[str, Any], schema: dict[str, Any]
) -> None:
    """A skeleton read off a span may carry anything; only an object's keys, an array's
    items and a string's length are checked."""
    assert validate_skeleton(skeleton, schema) == ([], [])


def test_the_grid_reaches_every_outcome() -> None:
    """Each schema of the grids is met by some instance and broken by another."""
    for schema in VALUE_SCHEMAS + SHAPE_SCHEMAS:
        outcomes = {reference_valid(i, schema) for i in itertools.chain(VALUES, SHAPES)}
        assert outcomes == {True, False}, schema


def test_a_type_the_subset_does_not_know_never_causes_an_error() -> None:
    """Like the keywords it ignores: a schema naming a type outside JSON Schema's seven
    (a draft-04 `any`, a vendor's `decimal`) holds no instance against it."""
    assert validate(1.5, {"type": "decimal"}) == []
    assert validate(1.5, {"type": ["string", "decimal"]}) == []
    assert validate(1.5, {"type": ["string", "boolean"]}) == [
        "$: expected string or boolean, got float"
    ]
