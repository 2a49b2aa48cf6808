"""The span view at its edges: a custom identity attribute read as configured, a call
compared with no identity known, the digest of an empty turn, and the view built once
per trace."""

from __future__ import annotations

from pathgrade.detectors.conventions import Conventions, IdentityConfig
from pathgrade.detectors.view import DetectorContext, TraceView, turn_digest
from pathgrade.schemas.model import Trace

from tests.support.traces import TraceBuilder


def test_a_custom_identity_attribute_is_read_as_configured() -> None:
    b = TraceBuilder(identity=None)
    b.root.attributes.update({"x.customer": "cust-1", "enduser.id": "cust-9"})
    conventions = Conventions(identity=IdentityConfig(attribute="x.customer"))
    assert TraceView(b.build(), conventions).session_identity == "cust-1"


def test_without_a_session_identity_a_call_cannot_be_compared() -> None:
    b = TraceBuilder(identity=None)
    call = b.tool("change_plan", {"account_id": "cust-1"}, effect="write")
    view = TraceView(b.build(), Conventions())
    (tool_call,) = [c for c in view.tool_calls if c.span is call]
    assert view.is_session(tool_call, "account_id") is None


def test_the_digest_of_a_turn_without_spans_starts_at_zero() -> None:
    empty = Trace("t", "9" * 32, [])
    assert turn_digest(TraceView(empty, Conventions()), "conv").start_ns == 0


def test_a_context_builds_the_view_of_a_trace_once() -> None:
    context = DetectorContext()
    first, second = TraceBuilder("a" * 32).build(), TraceBuilder("b" * 32).build()
    view = context.view_of(first)
    assert context.view_of(first) is view
    assert context.view_of(second).trace is second
