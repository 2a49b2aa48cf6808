"""pathgrade's own behaviour of ``match`` and ``graph_match`` beyond agentevals' vectors."""

from __future__ import annotations

import dataclasses
import sys
from types import MappingProxyType

import pytest
from pathgrade.batch_plane.scoring.trajectory import ToolCall, graph_match, match
from pathgrade.batch_plane.scoring.trajectory_calls import Message


def turn(*calls: dict) -> list[dict]:
    """A user question and one assistant message holding ``calls`` (plain dicts)."""
    return [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": list(calls)}]


def test_one_to_one_matching_succeeds_where_greedy_first_fit_fails():
    # Reference order: the arg-free call first. agentevals' first-fit pairs it with the first
    # output call f{x: 1}, leaving the reference f{x: 1} unmatched (agentevals: False).
    # A one-to-one pairing exists: f{} <-> f{y: 2}, f{x: 1} <-> f{x: 1}.
    outputs = turn({"name": "f", "args": {"x": 1}}, {"name": "f", "args": {"y": 2}})
    reference = turn({"name": "f", "args": {}}, {"name": "f", "args": {"x": 1}})
    for mode in ("superset", "unordered", "strict"):
        assert match(outputs, reference, mode=mode, args_mode="superset") is True


def test_no_pairing_exists_is_a_mismatch():
    outputs = turn({"name": "f", "args": {"y": 2}}, {"name": "f", "args": {"y": 3}})
    reference = turn({"name": "f", "args": {}}, {"name": "f", "args": {"x": 1}})
    assert match(outputs, reference, mode="superset", args_mode="superset") is False


def test_matchers_always_receive_output_args_first():
    # agentevals hands (reference, output) to the matcher in subset mode; pathgrade keeps
    # (output, reference) in every mode, so args_mode="subset" means output args within
    # the reference args here too.
    seen: list[tuple[dict, dict]] = []

    def record(output_args: dict, reference_args: dict) -> bool:
        seen.append((output_args, reference_args))
        return True

    outputs, reference = (
        turn({"name": "f", "args": {"o": 1}}),
        turn({"name": "f", "args": {"r": 1}}),
    )
    for mode in ("strict", "unordered", "subset", "superset"):
        assert match(outputs, reference, mode=mode, overrides={"f": record}) is True
    assert seen and all(pair == ({"o": 1}, {"r": 1}) for pair in seen)
    narrow, wide = (
        turn({"name": "f", "args": {"a": 1}}),
        turn({"name": "f", "args": {"a": 1, "b": 2}}),
    )
    assert match(narrow, wide, mode="subset", args_mode="subset") is True
    assert match(narrow, wide, mode="subset", args_mode="superset") is False


def test_a_key_list_override_compares_only_those_dotted_keys_and_for_equality():
    keys = {"f": ["time.start", "city"]}
    reference = turn({"name": "f", "args": {"time": {"start": 5}, "city": "Oslo", "x": 1}})

    def output(start: object, city: str = "Oslo") -> list[dict]:
        return turn({"name": "f", "args": {"time": {"start": start}, "city": city, "x": 2}})

    assert match(output(5), reference, overrides=keys) is True  # x is not compared
    assert match(output(6), reference, overrides=keys) is False  # a later start is no match
    assert match(output(4), reference, overrides=keys) is False
    assert match(output(5, "Paris"), reference, overrides=keys) is False
    not_nested = turn({"name": "f", "args": {"time": "5", "city": "Oslo"}})
    assert match(not_nested, reference, overrides=keys) is False  # time.start is missing
    both_missing = turn({"name": "f", "args": {"city": "Oslo"}})
    assert match(both_missing, turn({"name": "f", "args": {"city": "Oslo"}}), overrides=keys)


def test_strict_compares_roles_but_not_contents():
    outputs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert match(outputs, [{"role": "user", "content": "x"}, {"role": "assistant"}]) is True
    assert match(outputs, [{"role": "user"}, {"role": "tool"}]) is False
    assert match([{"role": "user"}, {"role": "tool"}], outputs) is False  # either way round


@pytest.mark.parametrize(("output", "expected"), [(1, True), (0, False), (2, False)])
def test_subset_args_need_the_reference_value_itself(output: int, expected: bool):
    outputs = turn({"name": "f", "args": {"a": output}})
    reference = turn({"name": "f", "args": {"a": 1, "b": 2}})
    assert match(outputs, reference, args_mode="subset") is expected


@pytest.mark.parametrize("keys", [["a", ""], ["a", 3]], ids=["empty key", "not a string"])
def test_every_key_of_a_key_list_must_be_a_key_path(keys: list):
    with pytest.raises(ValueError, match=r"overrides\['f'\]: a key list must be a non-empty"):
        match(turn(), turn(), overrides={"f": keys})


def test_langchain_role_names_equal_openai_roles():
    human_ai = [{"role": "human"}, {"role": "ai", "tool_calls": [{"name": "f", "args": {}}]}]
    assert match(human_ai, turn({"name": "f"})) is True


def test_empty_tool_call_list_equals_no_tool_calls():
    assert match([{"role": "assistant", "tool_calls": []}], [{"role": "assistant"}]) is True


def test_any_mapping_holds_arguments():
    frozen_args = MappingProxyType({"a": 1})
    assert match(turn({"name": "f", "args": frozen_args}), turn({"name": "f", "args": {"a": 1}}))


def test_tool_calls_and_messages_are_frozen():
    call, message = ToolCall("f", {"a": 1}), Message("assistant", ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "g"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.role = "user"  # type: ignore[misc]


def test_without_langchain_an_object_is_no_message(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)  # import fails
    with pytest.raises(TypeError, match=r"outputs\[0\]: expected a message dict or a LangChain"):
        match([object()], turn())


def test_messages_dict_and_tool_call_objects_are_accepted():
    outputs = {"messages": [{"role": "assistant", "tool_calls": [ToolCall("f", {"a": 1})]}]}
    assert match(outputs, [{"role": "assistant", "tool_calls": [{"name": "f", "args": {"a": 1}}]}])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "fuzzy"}, "mode: unknown mode 'fuzzy'"),
        ({"args_mode": "loose"}, "args_mode: unknown mode 'loose'"),
        ({"overrides": {"f": "loose"}}, "overrides['f']: unknown args mode"),
        ({"overrides": {"f": []}}, "overrides['f']: a key list must be a non-empty list"),
        ({"overrides": {"f": 3}}, "overrides['f']: expected an args mode"),
    ],
)
def test_bad_options_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        match(turn(), turn(), **kwargs)


@pytest.mark.parametrize(
    ("outputs", "error", "message"),
    [
        ([{"content": "no role"}], ValueError, r"outputs\[0\]\.role: must be a non-empty string"),
        ([{"role": ""}], ValueError, r"outputs\[0\]\.role: must be a non-empty string"),
        ([{"role": 3}], ValueError, r"outputs\[0\]\.role: must be a non-empty string"),
        (
            [{"role": "assistant", "tool_calls": [{"name": ""}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.name: must be a non-empty string",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"name": 3}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.name: must be a non-empty string",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.function\.name: must be a non-empty string",
        ),
        ([42], TypeError, r"outputs\[0\]: expected a message dict or a LangChain message"),
        ({"msgs": []}, ValueError, "outputs: a dict must hold the message list under 'messages'"),
        ("text", TypeError, "outputs: expected a list of messages"),
        (
            [{"role": "assistant", "tool_calls": [{"args": {}}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.name: must be a non-empty string",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.function\.arguments: not valid JSON",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[]"}}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.function\.arguments: must decode to a JSON object",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"name": "f", "args": [1]}]}],
            ValueError,
            r"outputs\[0\]\.tool_calls\[0\]\.args: must be a dict",
        ),
    ],
)
def test_bad_messages_name_the_field(outputs, error, message):
    with pytest.raises(error, match=message):
        match(outputs, turn())


# agentevals python/tests/graph_trajectory/test_graph_trajectory_strict.py::test_trajectory_match
# runs a live gpt-4o-mini agent and compares its extracted steps with this reference; the
# extraction needs LangGraph and an LLM, so the vector is reproduced on the steps themselves.
GRAPH_REFERENCE = [["__start__", "agent", "tools", "__interrupt__"], ["agent"]]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (GRAPH_REFERENCE, True),
        ((("__start__", "agent", "tools", "__interrupt__"), ("agent",)), True),
        ([["__start__", "agent", "tools", "__interrupt__"]], False),
        ([["__start__", "tools", "agent", "__interrupt__"], ["agent"]], False),
        ([["__start__", "agent", "tools", "__interrupt__"], ["agent", "tools"]], False),
    ],
)
def test_graph_match(steps, expected):
    assert graph_match(steps, GRAPH_REFERENCE) is expected


def test_graph_match_names_bad_steps():
    with pytest.raises(TypeError, match=r"^steps: expected a list of steps, got str"):
        graph_match("agent", GRAPH_REFERENCE)
    with pytest.raises(TypeError, match=r"steps\[1\]: expected a list of node names"):
        graph_match([["a"], "b"], GRAPH_REFERENCE)
    with pytest.raises(TypeError, match=r"reference_steps\[0\]: every node name must be a str"):
        graph_match([["a"]], [[1]])
