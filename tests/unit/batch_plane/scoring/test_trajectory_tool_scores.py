"""DeepEval ToolCorrectnessMetric and RAGAS ToolCallAccuracy / ToolCallF1 vectors."""

from __future__ import annotations

from enum import IntEnum, StrEnum
from types import MappingProxyType

import numpy as np
import pytest
from pathgrade.batch_plane.scoring.trajectory import (
    tool_call_accuracy,
    tool_call_f1,
    tool_correctness,
)

# --- DeepEval -------------------------------------------------------------------------------
# Source: confident-ai/deepeval tests/test_metrics/test_tool_correctness_metric.py at commit
# a2e0d4cfd3118352d321c1c84bdeba17d4a201bc (ToolCallType FUNCTION/MCP -> "type" key).
ASK = {"name": "ask_question", "args": {"repoName": "confident-ai/deepeval"}}


def typed(call: dict, tool_type: str) -> dict:
    return {**call, "type": tool_type}


@pytest.mark.parametrize(
    ("options", "called_type", "expected_type", "score"),
    [
        pytest.param({}, "mcp", "function", 0.0, id="test_type_mismatch_fails"),
        pytest.param({}, "mcp", "mcp", 1.0, id="test_matching_type_passes"),
        pytest.param(
            {"exact": True}, "mcp", "function", 0.0, id="test_type_mismatch_fails_exact_match"
        ),
        pytest.param(
            {"ordering": True}, "mcp", "function", 0.0, id="test_type_mismatch_fails_with_ordering"
        ),
    ],
)
def test_deepeval_type_vectors(options, called_type, expected_type, score):
    called, expected = [typed(ASK, called_type)], [typed(ASK, expected_type)]
    assert tool_correctness(called, expected, **options) == score


def test_deepeval_defaulted_type_is_function():
    # test_defaulted_type_is_function
    assert tool_correctness([{"name": "get_weather"}], [{"name": "get_weather"}]) == 1.0
    assert tool_correctness([{"name": "get_weather"}], [typed({"name": "get_weather"}, "function")])


def test_deepeval_mixed_types_score_partially():
    called = [typed({"name": "get_weather"}, "function"), typed({"name": "ask_question"}, "mcp")]
    expected = [typed({"name": "get_weather"}, "function"), {"name": "ask_question"}]
    assert tool_correctness(called, expected) == 0.5


def test_deepeval_same_name_different_types_do_not_match():
    called = [typed({"name": "ask_question"}, "mcp"), {"name": "ask_question"}]
    assert tool_correctness(called, [{"name": "ask_question"}]) == 1.0


# Worked examples of the ToolCorrectnessMetric docs page
# (deepeval docs/content/docs/(agentic)/metrics-tool-correctness.mdx, same commit).
def test_deepeval_docs_extra_called_tool_is_not_penalised():
    called = [{"name": "WebSearch"}, {"name": "ToolQuery"}]
    assert tool_correctness(called, [{"name": "WebSearch"}]) == 1.0


def test_deepeval_docs_ordering_example():
    # The page calls this tool calling "correct" under should_consider_ordering: the weighted
    # LCS is 2 of 3 expected calls, which passes the default 0.5 threshold.
    expected = [{"name": "WebSearch"}, {"name": "ToolQuery"}, {"name": "WebSearch"}]
    called = [{"name": "WebSearch"}, {"name": "WebSearch"}, {"name": "ToolQuery"}]
    assert tool_correctness(called, expected, ordering=True) == pytest.approx(2 / 3)
    assert tool_correctness(called, expected) == 1.0
    assert tool_correctness(called, expected, exact=True) == 0.0


def test_identical_duplicate_calls_count_as_often_as_they_occur():
    # Deliberate difference: DeepEval tracks used calls in a set of equal ToolCalls, so the
    # second identical call is skipped and DeepEval scores 0.5 here; pathgrade scores 1.0.
    search = {"name": "search", "args": {"q": "x"}}
    assert tool_correctness([search, search], [search, search]) == 1.0
    assert tool_correctness([search, search], [search, search], compare_args=True) == 1.0
    assert tool_correctness([search], [search, search]) == 0.5


def test_partial_argument_credit_follows_deepeval_key_overlap():
    expected = [{"name": "book", "args": {"city": "Paris", "nights": 2, "opt": {"a": 1, "b": 2}}}]
    called = [{"name": "book", "args": {"city": "Paris", "nights": 3, "opt": {"a": 1, "b": 9}}}]
    # city 1/3 + opt (1/2)/3 ; nights differs
    assert tool_correctness(called, expected, compare_args=True) == pytest.approx(1 / 3 + 1 / 6)
    assert tool_correctness(called, expected) == 1.0
    assert tool_correctness(called, expected, exact=True, compare_args=True) == 0.0


def test_compare_output_requires_equal_outputs():
    expected = [{"name": "f", "output": 1}, {"name": "g", "output": 2}]
    called = [{"name": "f", "output": 1}, {"name": "g", "output": 3}]
    assert tool_correctness(called, expected, compare_output=True) == 0.5
    assert tool_correctness(called, expected, ordering=True, compare_output=True) == 0.5


@pytest.mark.parametrize("options", [{}, {"ordering": True}, {"exact": True}])
def test_empty_lists(options):
    assert tool_correctness([], [], **options) == 1.0
    assert tool_correctness([{"name": "f"}], [], **options) == 0.0
    assert tool_correctness([], [{"name": "f"}], **options) == 0.0


@pytest.mark.parametrize(
    "options",
    [
        {"compare_args": True},
        {"compare_output": True},
        {"ordering": True},
        {"exact": True},
        {"exact": True, "compare_output": True},
    ],
)
@pytest.mark.parametrize(("called", "expected"), [("a", "b"), ("b", "a")])
def test_a_different_tool_earns_nothing_whichever_name_sorts_first(options, called, expected):
    assert tool_correctness([{"name": called}], [{"name": expected}], **options) == 0.0


@pytest.mark.parametrize(
    "options", [{"compare_output": True}, {"exact": True, "compare_output": True}]
)
@pytest.mark.parametrize(("called", "expected"), [("x", "y"), ("y", "x")])
def test_a_different_output_earns_nothing_whichever_sorts_first(options, called, expected):
    call, want = {"name": "f", "output": called}, {"name": "f", "output": expected}
    assert tool_correctness([call], [want], **options) == 0.0
    assert tool_correctness([want], [want], **options) == 1.0


@pytest.mark.parametrize(("called", "expected"), [("mcp", "function"), ("function", "mcp")])
def test_a_different_tool_type_earns_nothing_whichever_sorts_first(called, expected):
    call, want = {"name": "f", "type": called}, {"name": "f", "type": expected}
    assert tool_correctness([call], [want], compare_args=True) == 0.0


def test_partial_argument_credit_is_over_every_key_of_either_call():
    expected = [{"name": "f", "args": {"a": 1, "b": 2}}]
    called = [{"name": "f", "args": {"a": 1, "c": 3}}]
    assert tool_correctness(called, expected, compare_args=True) == pytest.approx(1 / 3)


def test_outputs_are_not_compared_by_default():
    called, expected = [{"name": "f", "output": 1}], [{"name": "f", "output": 2}]
    assert tool_correctness(called, expected) == 1.0
    assert tool_correctness(called, expected, compare_output=True) == 0.0


def test_ordering_uses_each_called_tool_once():
    assert tool_correctness([{"name": "a"}], [{"name": "a"}, {"name": "a"}], ordering=True) == 0.5


def test_a_call_no_expected_call_credits_stays_free_for_a_later_one():
    called = [{"name": "b"}]
    assert tool_correctness(called, [{"name": "a"}, {"name": "b"}], compare_args=True) == 0.5


def test_partial_argument_credit_skips_a_value_that_is_no_longer_an_object():
    expected = [{"name": "f", "args": {"when": {"day": 1}, "city": "Oslo"}}]
    called = [{"name": "f", "args": {"when": 5, "city": "Oslo"}}]
    assert tool_correctness(called, expected, compare_args=True) == 0.5  # city only


def test_openai_tool_call_entries_are_accepted():
    openai_entry = {
        "id": "1",
        "type": "function",
        "function": {"name": "f", "arguments": '{"a": 1}'},
    }
    assert (
        tool_correctness(
            [openai_entry], [{"name": "f", "args": {"a": 1}}], exact=True, compare_args=True
        )
        == 1.0
    )


def test_bad_tool_call_names_the_argument():
    with pytest.raises(TypeError, match=r"called\[1\]: expected a tool-call dict, got str"):
        tool_correctness([{"name": "f"}, "g"], [])
    with pytest.raises(ValueError, match=r"expected\[0\]\.type: must be a string"):
        tool_correctness([], [{"name": "f", "type": 3}])


# --- RAGAS ----------------------------------------------------------------------------------
# Source: explodinggradients/ragas tests/unit/test_tool_call_accuracy.py and
# tests/unit/test_tool_call_f1.py at commit 3e28e9dec93897f47a98065be4c62f6d072a45a7. RAGAS
# mocks its ExactMatch argument comparison in several tests; the mocked values are the ones
# the real string comparison gives, so the real comparison runs here.
SEARCH = {"name": "search", "args": {"query": "python"}}
FILTER = {"name": "filter", "args": {"type": "recent"}}


@pytest.mark.parametrize(
    ("predicted", "reference", "score"),
    [
        pytest.param([SEARCH, FILTER], [SEARCH, FILTER], 1.0, id="test_perfect_match_scenario"),
        pytest.param([], [SEARCH], 0.0, id="test_no_predicted_tool_calls"),
        pytest.param([FILTER, SEARCH], [SEARCH, FILTER], 0.0, id="test_sequence_misalignment"),
        pytest.param([SEARCH, FILTER], [SEARCH], 0.0, id="test_length_mismatch_more_predicted"),
        pytest.param([SEARCH], [SEARCH, FILTER], 0.0, id="test_length_mismatch_fewer_predicted"),
        pytest.param(
            [{"name": "search", "args": {"query": "python", "limit": 5}}, FILTER],
            [{"name": "search", "args": {"query": "python", "limit": 10}}, FILTER],
            0.75,
            id="test_partial_argument_match",
        ),
        pytest.param(
            [{"name": "wrong_tool", "args": {"query": "python"}}],
            [SEARCH],
            0.0,
            id="test_wrong_tool_names",
        ),
        pytest.param([], [], 1.0, id="test_empty_reference_tool_calls"),
        pytest.param(
            [{"name": "unexpected", "args": {}}],
            [],
            0.0,
            id="test_empty_reference_with_predictions",
        ),
    ],
)
def test_ragas_tool_call_accuracy_vectors(predicted, reference, score):
    assert tool_call_accuracy(predicted, reference) == score


def test_ragas_multiple_ai_messages():
    # test_multiple_ai_messages: calls from two messages are concatenated before scoring.
    from_messages = [c for message in ([SEARCH], [FILTER]) for c in message]
    assert tool_call_accuracy(from_messages, [SEARCH, FILTER]) == 1.0


def test_ragas_flexible_order():
    # test_is_sequence_aligned_flexible_mode / test_flexible_order_sorting_behavior
    weather = {"name": "WeatherForecast", "args": {"location": "Paris"}}
    uv = {"name": "UVIndex", "args": {"location": "Paris"}}
    assert tool_call_accuracy([uv, weather], [weather, uv], strict_order=False) == 1.0
    assert tool_call_accuracy([uv, weather], [weather, uv], strict_order=True) == 0.0


def test_ragas_sort_key_ignores_argument_order():
    # test_sorted_key_for_tool_call: the same call with args in another order pairs up.
    one = {"name": "WeatherForecast", "args": {"location": "Paris", "units": "metric"}}
    other = {"name": "WeatherForecast", "args": {"units": "metric", "location": "Paris"}}
    uv = {"name": "UVIndex", "args": {"location": "Paris"}}
    assert tool_call_accuracy([one, uv], [uv, other], strict_order=False) == 1.0


def test_ragas_compares_argument_values_as_strings():
    assert tool_call_accuracy(
        [{"name": "f", "args": {"n": 1}}], [{"name": "f", "args": {"n": "1"}}]
    )
    assert tool_call_accuracy([{"name": "f", "args": {"n": 1}}], [{"name": "f", "args": {}}]) == 0


WEATHER = {"name": "WeatherForecast", "args": {"location": "Paris"}}
UV_INDEX = {"name": "UVIndex", "args": {"location": "Paris"}}
AIR = {"name": "AirQuality", "args": {"location": "Paris"}}


@pytest.mark.parametrize(
    ("reference", "predicted", "score"),
    [
        pytest.param([WEATHER], [WEATHER], 1.0, id="test_tool_call_f1_full_match"),
        pytest.param([WEATHER, UV_INDEX], [WEATHER], 0.67, id="test_tool_call_f1_partial_match"),
        pytest.param([WEATHER], [AIR], 0.0, id="test_tool_call_f1_no_match"),
        pytest.param([WEATHER], [WEATHER, AIR], 0.67, id="test_tool_call_f1_extra_call"),
    ],
)
def test_ragas_tool_call_f1_vectors(reference, predicted, score):
    # RAGAS's tests compare round(score, 2); pathgrade does not round (RAGAS rounds to 4).
    assert round(tool_call_f1(predicted, reference), 2) == score


def test_f1_counts_duplicates_and_scores_empty_lists_as_perfect():
    # Deliberate differences: RAGAS collapses duplicates (F1 1.0 here) and scores [] vs [] 0.0.
    assert tool_call_f1([WEATHER, WEATHER], [WEATHER]) == pytest.approx(2 / 3)
    assert tool_call_f1([], []) == 1.0
    assert tool_call_f1([], [WEATHER]) == 0.0


def test_f1_accepts_unhashable_argument_values():
    nested = {"name": "f", "args": {"ids": [1, 2], "filter": {"a": [3]}}}
    reordered = {"name": "f", "args": {"filter": {"a": [3]}, "ids": [1, 2]}}
    assert tool_call_f1([nested], [reordered]) == 1.0
    assert tool_call_f1([nested], [{"name": "f", "args": {"ids": [2, 1]}}]) == 0.0


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        pytest.param({"x": {}}, {"x": []}, id="object-vs-array"),
        pytest.param({"x": {"k": 1}}, {"x": [["k", 1]]}, id="object-vs-list-of-pairs"),
        pytest.param({"x": 1}, {"x": True}, id="number-vs-boolean"),
        pytest.param({"x": 0}, {"x": False}, id="zero-vs-false"),
        pytest.param({"x": "1"}, {"x": 1}, id="string-vs-number"),
        pytest.param({"x": None}, {"x": "None"}, id="null-vs-string"),
        pytest.param({"x": [True]}, {"x": [1]}, id="nested-boolean-vs-number"),
    ],
)
def test_f1_never_equates_arguments_of_different_json_types(predicted, reference):
    assert (
        tool_call_f1([{"name": "d", "args": predicted}], [{"name": "d", "args": reference}]) == 0.0
    )


def test_f1_takes_an_int_or_float_subclass_for_the_json_number_it_is():
    class Level(IntEnum):
        HIGH = 2

    reference = [{"name": "f", "args": {"level": 2, "ratio": 0.5}}]
    predicted = [{"name": "f", "args": {"level": Level.HIGH, "ratio": np.float64(0.5)}}]
    assert tool_call_f1(predicted, reference) == 1.0


def test_f1_takes_any_mapping_and_str_subclass_for_the_json_value_it_is():
    class Level(StrEnum):
        HIGH = "high"

    reference = [{"name": "f", "args": {"level": "high", "where": {"city": "Oslo"}}}]
    predicted = [{"name": "f", "args": {"level": Level.HIGH,
                                        "where": MappingProxyType({"city": "Oslo"})}}]  # fmt: skip
    assert tool_call_f1(predicted, reference) == 1.0


def test_f1_equates_the_same_json_value_whatever_its_python_spelling():
    same = [({"x": 1}, {"x": 1.0}), ({"x": [1, {"a": None}]}, {"x": (1, {"a": None})}),
            ({"a": 1, "b": 2}, {"b": 2, "a": 1})]  # fmt: skip
    for predicted, reference in same:
        assert tool_call_f1([{"name": "d", "args": predicted}],
                            [{"name": "d", "args": reference}]) == 1.0  # fmt: skip
