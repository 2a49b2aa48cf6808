"""agentevals' own trajectory-match test vectors, reproduced against pathgrade's ``match``.

Source: langchain-ai/agentevals, python/tests/test_trajectory.py at commit
946ad15b9f2ce9bc9843edd2bb773bd07d78ca7e (python/tests/test_trajectory_async.py repeats the
same vectors for the async evaluator). Each case id is ``<agentevals test name>-<mode>``.
Message contents are shortened where long: neither library compares contents.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pathgrade.batch_plane.scoring.trajectory import match

MODES = ("unordered", "superset", "subset", "strict")


def call(name: str, arguments: str | dict[str, Any]) -> dict[str, Any]:
    """OpenAI tool_calls entry, as agentevals' tests write them."""
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"function": {"name": name, "arguments": encoded}}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def tool(content: str) -> dict[str, Any]:
    return {"role": "tool", "content": content}


def assistant(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def per_mode(name: str, outputs: list, reference: list, scores: dict[str, bool], **kw: Any):
    """One pytest.param per trajectory mode with agentevals' expected score."""
    return [
        pytest.param(outputs, reference, mode, kw, scores[mode], id=f"{name}-{mode}")
        for mode in MODES
    ]


ALL_TRUE = dict.fromkeys(MODES, True)
ALL_FALSE = dict.fromkeys(MODES, False)
ONLY_SUBSET = {"unordered": False, "superset": False, "subset": True, "strict": False}
ONLY_SUPERSET = {"unordered": False, "superset": True, "subset": False, "strict": False}
ALL_BUT_STRICT = {"unordered": True, "superset": True, "subset": True, "strict": False}

SF_ASK = user("What is the weather in SF?")
SF_LONDON_ASK = user("What is the weather in SF and London?")

# test_trajectory_match
WEATHER_SF = [
    SF_ASK,
    assistant(call("get_weather", {"city": "San Francisco"})),
    tool("It's 80 degrees and sunny in SF."),
    assistant(content="The weather in SF is 80 degrees and sunny."),
]
WEATHER_SF_REFERENCE = [
    SF_ASK,
    assistant(call("get_weather", {"city": "San Francisco"})),
    tool("It's 80 degrees and sunny in San Francisco."),
    assistant(content="The weather in SF is 80˚ and sunny."),
]

# test_trajectory_with_different_tool_message_order
TWO_CITIES = [
    SF_LONDON_ASK,
    assistant(call("get_weather", {"city": "SF"}), call("get_weather", {"city": "London"})),
    tool("It's 80 degrees and sunny in SF."),
    tool("It's 90 degrees and rainy in London."),
    assistant(content="The weather in SF is 80 degrees and sunny. ..."),
]
TWO_CITIES_REFERENCE = [
    SF_LONDON_ASK,
    assistant(call("get_weather", {"city": "London"}), call("get_weather", {"city": "SF"})),
    tool("It's 90 degrees and rainy in London."),
    tool("It's 80 degrees and sunny in SF."),
    assistant(content="The weather in London is 90˚ and rainy. ..."),
]

# test_trajectory_with_different_message_count (reference: TWO_CITIES_REFERENCE)
TWO_CITIES_TWO_TURNS = [
    SF_LONDON_ASK,
    assistant(call("get_weather", {"city": "SF"})),
    tool("It's 80 degrees and sunny in SF."),
    assistant(call("get_weather", {"city": "London"})),
    tool("It's 90 degrees and rainy in London."),
    assistant(content="The weather in SF is 80 degrees and sunny. ..."),
]

# test_trajectory_subset_tool_call
ONLY_SF = [
    SF_LONDON_ASK,
    assistant(call("get_weather", {"city": "SF"})),
    tool("It's 80 degrees and sunny in SF."),
    assistant(content="... In London, it's 9000 degrees and hallucinating."),
]
TWO_CITIES_REFERENCE_TWICE_LONDON = [
    SF_LONDON_ASK,
    assistant(call("get_weather", {"city": "London"}), call("get_weather", {"city": "SF"})),
    tool("It's 90 degrees and rainy in London."),
    tool("It's 90 degrees and rainy in London."),
    assistant(content="The weather in London is 90˚ and rainy. ..."),
]

# test_exact_matcher_with_different_called_tools
WEATHER_SF_SHORT = [
    SF_ASK,
    assistant(call("get_weather", {"city": "SF"})),
    tool("It's 80 degrees and sunny in SF."),
    assistant(content="The weather in SF is 80 degrees and sunny."),
]
ACCUWEATHER_REFERENCE = [
    SF_ASK,
    assistant(call("accuweather_forecast", {"city": "San Francisco"})),
    tool("It's 80 degrees and sunny in San Francisco."),
    assistant(content="The weather in SF is 80˚ and sunny."),
]

# test_trajectory_with_extra_tool_calls_and_override / ..._subset_tool_calls_and_override
SF_AND_LONDON_SEPARATE = [
    SF_LONDON_ASK,
    assistant(
        call("get_weather", {"city": "San Francisco"}), call("get_weather", {"city": "London"})
    ),
    tool("It's 80 degrees and sunny in San Francisco."),
    tool("It's 90 degrees and rainy in London."),
    assistant(content="The weather in SF is 80˚ and sunny. In London, it's 90˚ and rainy."),
]
SF_AND_LONDON_ONE_CALL = [
    SF_LONDON_ASK,
    assistant(call("get_weather", {"city": "SF and London"})),
    tool("It's 80 degrees and sunny in SF, and 90 degrees and rainy in London."),
    assistant(content="The weather in SF is 80 degrees and sunny. ..."),
]


def flight_trajectory(*, search: bool, second_turn_calls: list[dict[str, Any]]) -> list:
    """Flight-agent conversation of the override tests; tool outputs shortened."""
    messages = [
        user("Hi there, what time is my flight?"),
        assistant(call("fetch_user_flight_information", "{}")),
        {"role": "tool", "name": "fetch_user_flight_information", "content": "[...]"},
        assistant(content="Your flight LX0112 from CDG to BSL is scheduled to depart ..."),
        user("Update it to the next flight after that and bump me to first class ..."),
    ]
    if search:
        arguments = {
            "start_time": "2025-03-22T18:34:40Z",
            "departure_airport": "CDG",
            "arrival_airport": "BSL",
        }
        messages += [
            assistant(call("search_flights", arguments)),
            {"role": "tool", "name": "search_flights", "content": "[...]"},
        ]
    messages += [
        assistant(*second_turn_calls),
        {"role": "tool", "name": "lookup_policy", "content": "..."},
        {"role": "tool", "name": "lookup_policy", "content": "..."},
        assistant(content="..."),
    ]
    return messages


# test_trajectory_match_with_overrides
POLICY_OUTPUTS = flight_trajectory(
    search=True,
    second_turn_calls=[
        call("lookup_policy", {"query": "flight upgrades"}),
        call("lookup_policy", {"query": "first class"}),
    ],
)
POLICY_REFERENCE = flight_trajectory(
    search=False,
    second_turn_calls=[
        call("lookup_policy", '{"query": "upgrade to first class"}'),
        call("lookup_policy", {"query": "foo"}),
    ],
)


def lookup_policy_query_matcher(tool_args: dict, reference_tool_args: dict) -> bool:
    """agentevals' test matcher: a reference query about upgrades needs 'upgrade' in output."""
    if reference_tool_args.get("query", {}) and "upgrade" in reference_tool_args.get("query", {}):
        return "upgrade" in tool_args.get("query", {})
    return True


# test_trajectory_match_with_nested_field_overrides
TIME_WINDOW = {"start": "2025-03-22T18:34:40Z", "end": "2025-03-22T20:34:40Z"}
NESTED_OUTPUTS = flight_trajectory(
    search=False,
    second_turn_calls=[
        call("lookup_policy", {"query": "flight upgrades", "time": TIME_WINDOW}),
        call("lookup_policy", {"query": "first class", "time": TIME_WINDOW}),
    ],
)
NESTED_REFERENCE = flight_trajectory(
    search=False,
    second_turn_calls=[
        call(
            "lookup_policy",
            '{"query": "foo", "time": {"start": "2025-03-22T18:34:40Z", "end": "baz"}}',
        ),
        call(
            "lookup_policy",
            {"query": "bar", "time": {"start": "2025-03-22T18:34:40Z", "end": "baz"}},
        ),
    ],
)


def flight_info(arguments: dict[str, Any]) -> list:
    """Trajectory of the tool_args_match_mode tests."""
    return [
        user("Hi there, what time is my flight?"),
        assistant(call("get_flight_info", arguments)),
        assistant(content="Your flight is at 10:00 AM."),
    ]


TRAJECTORY_VECTORS = [
    *per_mode("test_trajectory_match", WEATHER_SF, WEATHER_SF_REFERENCE, ALL_TRUE),
    *per_mode(
        "test_trajectory_with_different_tool_message_order",
        TWO_CITIES,
        TWO_CITIES_REFERENCE,
        ALL_TRUE,
    ),
    *per_mode(
        "test_trajectory_with_different_message_count",
        TWO_CITIES_TWO_TURNS,
        TWO_CITIES_REFERENCE,
        ALL_BUT_STRICT,
    ),
    *per_mode(
        "test_trajectory_subset_tool_call", ONLY_SF, TWO_CITIES_REFERENCE_TWICE_LONDON, ONLY_SUBSET
    ),
    *per_mode(
        "test_exact_matcher_with_different_called_tools",
        WEATHER_SF_SHORT,
        ACCUWEATHER_REFERENCE,
        ALL_FALSE,
    ),
    *per_mode(
        "test_trajectory_with_extra_tool_calls_and_override",
        SF_AND_LONDON_SEPARATE,
        SF_AND_LONDON_ONE_CALL,
        ONLY_SUPERSET,
        overrides={"get_weather": "ignore"},
    ),
    *per_mode(
        "test_trajectory_with_subset_tool_calls_and_override",
        SF_AND_LONDON_ONE_CALL,
        SF_AND_LONDON_SEPARATE,
        ONLY_SUBSET,
        overrides={"get_weather": "ignore"},
    ),
    *per_mode(
        "test_trajectory_match_with_overrides[no overrides]",
        POLICY_OUTPUTS,
        POLICY_REFERENCE,
        ALL_FALSE,
    ),
    *per_mode(
        "test_trajectory_match_with_overrides",
        POLICY_OUTPUTS,
        POLICY_REFERENCE,
        ONLY_SUPERSET,
        overrides={"lookup_policy": lookup_policy_query_matcher},
    ),
    *per_mode(
        "test_trajectory_match_with_nested_field_overrides[no overrides]",
        NESTED_OUTPUTS,
        NESTED_REFERENCE,
        ALL_FALSE,
    ),
    *per_mode(
        "test_trajectory_match_with_nested_field_overrides",
        NESTED_OUTPUTS,
        NESTED_REFERENCE,
        ALL_TRUE,
        overrides={"lookup_policy": ["time.start"]},
    ),
]


@pytest.mark.parametrize(
    ("outputs", "reference", "mode", "options", "expected"), TRAJECTORY_VECTORS
)
def test_agentevals_trajectory_vector(outputs, reference, mode, options, expected):
    assert match(outputs, reference, mode=mode, **options) is expected


ARGS_MODE_VECTORS = [
    # test_tool_args_match_mode_superset: output args hold an extra key
    *(
        pytest.param(
            {"is_cool": True, "flight_no": "LX0112"},
            {"flight_no": "LX0112"},
            mode,
            score,
            id=f"test_tool_args_match_mode_superset-{mode}",
        )
        for mode, score in [
            ("exact", False),
            ("ignore", True),
            ("subset", False),
            ("superset", True),
        ]
    ),
    # test_tool_args_match_mode_subset: reference args hold an extra key
    *(
        pytest.param(
            {"flight_no": "LX0112"},
            {"flight_no": "LX0112", "foo": "bar"},
            mode,
            score,
            id=f"test_tool_args_match_mode_subset-{mode}",
        )
        for mode, score in [
            ("exact", False),
            ("ignore", True),
            ("subset", True),
            ("superset", False),
        ]
    ),
    # test_tool_args_match_mode_exact: identical args
    *(
        pytest.param(
            {"flight_no": "LX0112"},
            {"flight_no": "LX0112"},
            mode,
            True,
            id=f"test_tool_args_match_mode_exact-{mode}",
        )
        for mode in ("exact", "ignore", "subset", "superset")
    ),
]


@pytest.mark.parametrize(
    ("output_args", "reference_args", "args_mode", "expected"), ARGS_MODE_VECTORS
)
def test_agentevals_args_mode_vector(output_args, reference_args, args_mode, expected):
    outputs, reference = flight_info(output_args), flight_info(reference_args)
    assert match(outputs, reference, args_mode=args_mode) is expected


def sf_city(output_args: dict, reference_args: dict) -> bool:
    """agentevals' lambda override: both cities name San Francisco."""
    return output_args["city"] in ("SF", "San Francisco") and reference_args["city"] in (
        "SF",
        "San Francisco",
    )


def langchain_trajectory(reference_tool: str, reference_city: str) -> tuple[list, list]:
    """LangChain-message trajectories of the two LangChain tests."""
    messages = pytest.importorskip(
        "langchain_core.messages", reason="langchain_core not installed: LangChain input path"
    )
    outputs = [
        messages.HumanMessage(content="What is the weather in SF?"),
        messages.AIMessage(
            content="", tool_calls=[{"id": "1234", "name": "get_weather", "args": {"city": "SF"}}]
        ),
        messages.ToolMessage(tool_call_id="1234", content="It's 80 degrees and sunny in SF."),
        messages.AIMessage(content="The weather in SF is 80 degrees and sunny."),
    ]
    reference = [
        messages.HumanMessage(content="What is the weather in SF?"),
        messages.AIMessage(
            content="Let me check that for you!",
            tool_calls=[{"id": "4321", "name": reference_tool, "args": {"city": reference_city}}],
        ),
        messages.ToolMessage(tool_call_id="4321", content="It's 80 degrees and sunny in SF."),
        messages.AIMessage(content="The weather in SF is 80˚ and sunny."),
    ]
    return outputs, reference


@pytest.mark.parametrize("mode", MODES)
def test_trajectory_match_with_langchain_messages_and_override(mode):
    outputs, reference = langchain_trajectory("get_weather", "San Francisco")
    assert match(outputs, reference, mode=mode) is False  # exact args differ without override
    assert match(outputs, reference, mode=mode, overrides={"get_weather": sf_city}) is True


@pytest.mark.parametrize("mode", MODES)
def test_trajectory_match_with_langchain_messages_failure(mode):
    outputs, reference = langchain_trajectory("accuweather_forecast", "San Francisco")
    assert match(outputs, reference, mode=mode) is False
