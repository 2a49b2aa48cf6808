"""A support desk of three agents for `pathgrade edge run`, written with the OpenTelemetry
SDK alone (through the global tracer provider `edge run` installs).

Per user turn: an unnamed workflow root span; triage's `invoke_agent` run, which calls the
lookup agent as a sub-agent (lookup's run nested in triage's: a delegation) and then its
`transfer_to_billing` tool; billing's run beside triage's (control passed: a transfer).
The tool calls carry a customer id, which default settings keep out of the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace

CUSTOMER = "cust-4711"
NODES = ["triage", "lookup", "billing"]
GRAPH = {
    "start": "triage",
    "terminals": ["billing"],
    "nodes": [
        {"id": "triage", "tools": ["transfer_to_billing"], "intent": "say what you need"},
        {"id": "lookup", "tools": ["get_account"], "intent": "look up the account"},
        {"id": "billing", "tools": ["change_plan"], "intent": "change the plan"},
    ],
    "edges": [{"from": "triage", "to": "lookup"}, {"from": "lookup", "to": "billing"}],
}
tracer = trace.get_tracer("tests.integration.handoffs.edge_agent")


@contextmanager
def _agent(name: str) -> Iterator[None]:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    with tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes):
        yield


def _tool(name: str) -> None:
    arguments = json.dumps({"customer_id": CUSTOMER})
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": arguments,
    }
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes):
        pass


def respond(state: dict[str, Any], message: str, context: Any = None) -> dict[str, Any]:
    """One user turn through all three agents (see the module doc)."""
    with tracer.start_as_current_span("support workflow"):
        with _agent("triage"):
            with _agent("lookup"):
                _tool("get_account")
            _tool("transfer_to_billing")
        with _agent("billing"):
            _tool("change_plan")
    return {"response": "Your plan is changed.", "nodes": NODES, "done": True, "state": state}
