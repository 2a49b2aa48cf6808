"""The car-dealer LangGraph agent under a REAL LangChain instrumentation, sending its spans to
a collector: OpenLLMetry (`opentelemetry-instrumentation-langchain`) or OpenInference
(`openinference-instrumentation-langchain`). pathgrade writes no span here: every span is
the instrumentation's.

The graph is agent.py's (greetings routes to test_drive, warranty or faq, or ends the
turn; node metadata carries the tools and intents), with two differences: the routing call
goes to langchain-core's `GenericFakeChatModel`, scripted with the route whose intent the
user's message names (no network, no model), and the nodes call LangChain tools, so the
instrumentation records the tool spans. A message containing "force" makes test_drive hand
over to warranty with `Command(goto=...)`, an edge the graph does not have: the turn
`pathgrade`'s PG118 flags.

    python -m examples.car_dealer.instrumented --instrumentation openllmetry \
        --otlp http://127.0.0.1:4318 --service car-dealer "book a test drive" "hello"

`python -m examples.car_dealer.instrumented --export graph.json` writes the graph's
LangGraph JSON (`get_graph().to_json()`) instead.
"""

from __future__ import annotations

import argparse
import json
import operator
import sys
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from examples.car_dealer.agent import NODES, ROUTES

FORCE_WORD = "force"
SCRIPTED_USAGE = {"input_tokens": 12, "output_tokens": 2, "total_tokens": 14}
"""The token usage the scripted model reports, as a real model's response does."""


@tool
def check_availability(day: str) -> str:
    """Whether a test-drive slot is free on `day`."""
    return "free"


@tool
def book_test_drive(day: str) -> str:
    """Book a test drive on `day`."""
    return f"booked for {day}"


@tool
def lookup_warranty(model: str) -> str:
    """The warranty of a car model."""
    return "5 years"


@tool
def search_faq(question: str) -> str:
    """Search the dealer's FAQ."""
    return "open 9 to 6 on weekdays"


class DealerState(TypedDict, total=False):
    message: str
    route: str
    visited: Annotated[list[str], operator.add]


def scripted_route(message: str) -> str:
    """The route whose intent the message names, else END: what the fake model answers."""
    text = message.lower()
    return next((route for route in ROUTES if NODES[route]["intent"] in text), END)


def greetings(state: DealerState) -> dict[str, Any]:
    reply = AIMessage(scripted_route(state["message"]), usage_metadata=SCRIPTED_USAGE)
    model = GenericFakeChatModel(messages=iter([reply]))
    route = str(model.invoke([HumanMessage(state["message"])]).content)
    return {"route": route, "visited": ["greetings"]}


def test_drive(state: DealerState) -> Any:
    check_availability.invoke({"day": "saturday"})
    book_test_drive.invoke({"day": "saturday"})
    if FORCE_WORD in state["message"].lower():
        return Command(goto="warranty", update={"visited": ["test_drive"]})
    return {"visited": ["test_drive"]}


def warranty(state: DealerState) -> dict[str, Any]:
    lookup_warranty.invoke({"model": "sedan"})
    return {"visited": ["warranty"]}


def faq(state: DealerState) -> dict[str, Any]:
    search_faq.invoke({"question": state["message"]})
    return {"visited": ["faq"]}


def build_graph() -> Any:
    """The compiled graph (nodes carry agent.py's metadata: tools and intent)."""
    builder = StateGraph(DealerState)
    for name, function in [("greetings", greetings), ("test_drive", test_drive),
                           ("warranty", warranty), ("faq", faq)]:  # fmt: skip
        builder.add_node(name, function, metadata=NODES[name])
    builder.add_edge(START, "greetings")
    builder.add_conditional_edges(
        "greetings", lambda state: state["route"], {r: r for r in [*ROUTES, END]}
    )
    for route in ROUTES:
        builder.add_edge(route, END)
    return builder.compile()


def instrument(name: str, otlp: str, service: str) -> Any:
    """A tracer provider exporting to `otlp` (OTLP/HTTP), with `name`'s LangChain
    instrumentation installed on it."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp.rstrip("/") + "/v1/traces"))
    )
    if name == "openllmetry":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
    else:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    return provider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instrumentation", choices=["openllmetry", "openinference"])
    parser.add_argument("--otlp", default="http://127.0.0.1:4318")
    parser.add_argument("--service", default="car-dealer")
    parser.add_argument("--export", metavar="FILE", help="write the LangGraph JSON and exit")
    parser.add_argument("messages", nargs="*", help="one user turn each")
    args = parser.parse_args(argv)
    if args.export:
        with open(args.export, "w", encoding="utf-8") as out:
            json.dump(build_graph().get_graph().to_json(), out, indent=1, default=str)
        return 0
    if not args.instrumentation:
        parser.error("--instrumentation is required to send traffic")
    provider = instrument(args.instrumentation, args.otlp, args.service)
    graph = build_graph()
    for message in args.messages:
        visited = graph.invoke({"message": message})["visited"]
        print(f"{message!r}: {' > '.join(visited)}")
    provider.force_flush()
    provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
