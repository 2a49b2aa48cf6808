"""The hand-off detectors (PG119-PG122): each fires on its example and stays quiet on its
near miss, with content captured and on default privacy (facts only), and a clean
hand-off raises nothing under the default policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pathgrade.content.fingerprints import FactSecret
from pathgrade.detectors import default_policy, run_detectors
from pathgrade.detectors.handoffs import ContextParams, InverseParams, PingPongParams
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace
from pydantic import ValidationError

from tests.support.traces import TraceBuilder, detect
from tests.unit.detectors.test_detectors_facts import facts_only

CUSTOMER = "cust-1"
OTHER_KEY = FactSecret(b"r" * 32).for_tenant("default")  # a collector's key after a rotation


def workflow(**kwargs: Any) -> TraceBuilder:
    """A turn whose top is an unnamed workflow span (as the OpenAI Agents SDK's under
    OpenInference), so the agents run side by side below it."""
    b = TraceBuilder(agent="workflow", identity=None, **kwargs)
    b.root.genai.agent_name = ""
    return b


def redo_trace(repeat: bool = True) -> Trace:
    b = TraceBuilder(agent="triage")
    b.tool("get_account", {"customer_id": CUSTOMER}, effect="read")
    with b.inside(b.agent("billing")):
        b.tool("get_account", {"customer_id": CUSTOMER if repeat else "cust-2"}, effect="read")
        b.tool("change_plan", {"customer_id": CUSTOMER, "plan": "basic"}, effect="write")
    return b.build()


def undo_trace(same: bool = True, other: str = "cust-2") -> Trace:
    """triage opens a ticket, billing closes it (`same`) or another customer's (`other`)."""
    b = TraceBuilder(agent="triage")
    b.tool("open_ticket", {"customer_id": CUSTOMER, "reason": "bill"}, effect="write")
    with b.inside(b.agent("billing")):
        b.tool("close_ticket", {"customer_id": CUSTOMER if same else other}, effect="write")
    return b.build()


def identity_trace(receiver_identity: str | None) -> Trace:
    b = workflow()
    with b.inside(b.agent("triage", {genai.ENDUSER_ID: CUSTOMER})):
        b.tool("get_account", {"customer_id": CUSTOMER}, attributes={genai.ENDUSER_ID: CUSTOMER})
        b.handoff("billing")
    billing = {genai.ENDUSER_ID: receiver_identity} if receiver_identity else {}
    with b.inside(b.agent("billing", billing)):
        b.chat(text="Your plan is Plus.", attributes=billing)
    return b.build()


def reask_trace(question: str, unknown_first: bool = False) -> Trace:
    """billing's model asks `question` after triage looked the account up; with
    `unknown_first`, after an output neither captured nor recorded."""
    b = workflow()
    with b.inside(b.agent("triage")):
        b.tool("get_account", {"customer_id": CUSTOMER}, effect="read")
        b.handoff("billing")
    with b.inside(b.agent("billing")):
        if unknown_first:
            b.chat(calls=[])
        b.chat(text=question)
    return b.build()


def ask_then_look_up(question: str) -> Trace:
    """triage hands off holding nothing; billing asks `question`, then looks the account up
    itself: nothing the turn had before billing started."""
    b = workflow()
    with b.inside(b.agent("triage")):
        b.handoff("billing")
    with b.inside(b.agent("billing")):
        b.chat(text=question)
        b.tool("get_account", {"customer_id": CUSTOMER}, effect="read")
    return b.build()


def looked_up_at_start(question: str) -> Trace:
    """billing's own first call, starting the very moment its run does, holds the account
    before billing asks `question`: a call of the receiver, not one made before it."""
    b = workflow()
    with b.inside(b.agent("triage")):
        b.handoff("billing")
    with b.inside(b.agent("billing")) as billing:
        b.tool("get_account", {"customer_id": CUSTOMER}, effect="read").start_ns = billing.start_ns
        b.chat(text=question)
    return b.build()


def relay_trace(*agents: str) -> Trace:
    """Each of `agents` runs after the one before, at the same level: a relay of
    hand-offs in one direction, never back."""
    b = workflow()
    for agent in agents:
        with b.inside(b.agent(agent)):
            b.chat(text="noted")
    return b.build()


def handed_back_by_a_sub_agent(caller: str, other: str, sub_agent: str) -> Trace:
    """`caller` delegates to `sub_agent`, which hands the turn back to it, then hands off to
    `other`; the caller takes the turn back after `other` and hands it to `sub_agent`:
    the hand-off back comes from another agent than the one `caller` handed to."""
    b = workflow()
    with b.inside(b.agent(caller)):
        with b.inside(b.agent(sub_agent)):
            b.handoff(caller)
        b.handoff(other)
    with b.inside(b.agent(other)):
        b.chat(text="noted")
    with b.inside(b.agent(caller)):
        b.handoff(sub_agent)
    with b.inside(b.agent(sub_agent)):
        b.chat(text="noted")
    return b.build()


def ping_pong_trace(handoffs: int) -> Trace:
    b = workflow()
    agents = ["triage", "billing"]
    for n in range(handoffs + 1):
        with b.inside(b.agent(agents[n % 2])):
            b.chat(calls=[(f"h{n}", f"transfer_to_{agents[(n + 1) % 2]}")])
            if n < handoffs:
                b.handoff(agents[(n + 1) % 2])
    return b.build()


Call = tuple[str, dict[str, Any] | None]


def handed_calls(sender: list[Call], receiver: list[Call]) -> Trace:
    """triage makes the `sender` calls ((tool, arguments or None: not captured)) and hands
    off to billing, which makes the `receiver` calls."""
    b = TraceBuilder(agent="triage")
    for name, arguments in sender:
        b.tool(name, arguments, effect="read")
    with b.inside(b.agent("billing")):
        for name, arguments in receiver:
            b.tool(name, arguments, effect="read")
    return b.build()


def account(customer: str = CUSTOMER) -> Call:
    return ("get_account", {"customer_id": customer})


PLAN: Call = ("change_plan", {"customer_id": CUSTOMER, "plan": "basic"})


CASES: dict[str, tuple[Callable[[], Trace], Callable[[], Trace], Any]] = {
    "PG119": (redo_trace, lambda: redo_trace(repeat=False), None),
    "PG120": (undo_trace, lambda: undo_trace(same=False), {"close_ticket": "open_ticket"}),
    "PG120 another customer sorting first": (
        undo_trace,
        lambda: undo_trace(same=False, other="cust-0"),
        {"close_ticket": "open_ticket"},
    ),
    "PG121 identity missing": (
        lambda: identity_trace(None),
        lambda: identity_trace(CUSTOMER),
        None,
    ),
    "PG121 identity different": (
        lambda: identity_trace("cust-2"),
        lambda: identity_trace(CUSTOMER),
        None,
    ),
    "PG121 asked again": (
        lambda: reask_trace("Could you give me your account number?"),
        lambda: reask_trace("Which plan would you like?"),
        None,
    ),
    "PG119 a repeat after a call of another tool": (
        lambda: handed_calls([account()], [PLAN, account()]),
        lambda: handed_calls([account()], [PLAN, account("cust-2")]),
        None,
    ),
    "PG119 a repeat after a call of unknown arguments": (
        lambda: handed_calls([account()], [("get_account", None), account()]),
        lambda: handed_calls([account()], [account("cust-2")]),
        None,
    ),
    "PG119 a repeat after an ignored one": (
        lambda: handed_calls([account(), PLAN], [account(), PLAN]),
        lambda: handed_calls([account(), PLAN], [account()]),
        {"ignore": ["get_account"]},
    ),
    "PG121 asked again after an output of unknown content": (
        lambda: reask_trace("Could you give me your account number?", unknown_first=True),
        lambda: reask_trace("Which plan would you like?"),
        None,
    ),
    "PG122": (lambda: ping_pong_trace(3), lambda: ping_pong_trace(2), None),
    "PG121 the receiver looks the account up after asking": (
        lambda: reask_trace("Could you give me your account number?"),
        lambda: ask_then_look_up("Could you give me your account number?"),
        None,
    ),
    "PG121 the receiver's own call at its start": (
        lambda: reask_trace("Could you give me your account number?"),
        lambda: looked_up_at_start("Could you give me your account number?"),
        None,
    ),
    "PG122 relayed in name order": (
        lambda: ping_pong_trace(3),
        lambda: relay_trace("a_agent", "b_agent", "c_agent", "d_agent"),
        None,
    ),
    "PG122 relayed in reverse name order": (
        lambda: ping_pong_trace(3),
        lambda: relay_trace("d_agent", "c_agent", "b_agent", "a_agent"),
        None,
    ),
    "PG122 handed back by another agent sorting after": (
        lambda: ping_pong_trace(3),
        lambda: handed_back_by_a_sub_agent("desk", "billing", "triage"),
        None,
    ),
    "PG122 handed back by another agent sorting before": (
        lambda: ping_pong_trace(3),
        lambda: handed_back_by_a_sub_agent("desk", "triage", "billing"),
        None,
    ),
    "PG122 a limit of one": (
        lambda: ping_pong_trace(2),
        lambda: ping_pong_trace(1),
        {"max_alternations": 1},
    ),
}


@pytest.mark.parametrize("privacy", ["captured", "default"])
@pytest.mark.parametrize("case", list(CASES))
def test_fires_on_its_example_and_not_on_the_near_miss(case: str, privacy: str) -> None:
    fires, quiet, params = CASES[case]
    code = case.split()[0]
    view: Callable[[Trace], Trace] = facts_only if privacy == "default" else (lambda t: t)
    found = detect(code, view(fires()), params)
    assert [f.kind for f in found] == ["violation"], found
    assert detect(code, view(quiet()), params) == []


def test_each_finding_names_the_agents_and_what_happened_without_values() -> None:
    (redo,) = detect("PG119", redo_trace())
    assert (redo.details["sender"], redo.details["receiver"], redo.details["tool"]) == (
        "triage", "billing", "get_account",
    )  # fmt: skip
    (undo,) = detect("PG120", undo_trace(), {"close_ticket": "open_ticket"})
    assert (undo.details["tool"], undo.details["undone"]) == ("close_ticket", "open_ticket")
    (missing,) = detect("PG121", identity_trace(None))
    (different,) = detect("PG121", identity_trace("cust-2"))
    (asked,) = detect("PG121", reask_trace("What is your customer ID?"))
    assert [f.details["problem"] for f in (missing, different, asked)] == [
        "identity_missing", "identity_different", "asked_again",
    ]  # fmt: skip
    assert asked.details["slot"] == "account"
    assert missing.reason == (
        "The identity triage's spans carried is on none of billing's spans after the hand-off."
    )
    assert (
        different.reason
        == "billing's spans carry another identity than triage's after the hand-off."
    )
    (pong,) = detect("PG122", ping_pong_trace(4))
    assert pong.details == {"agents": ["billing", "triage"], "handoffs": 4}
    for finding in (redo, undo, missing, different, asked, pong):
        assert CUSTOMER not in finding.reason and "cust-2" not in finding.reason


def test_a_delegating_agents_own_span_is_context_not_what_it_carried() -> None:
    """The identity on the triage agent's span that encloses billing is billing's context:
    billing's spans need not repeat it (GenAI instrumentations set `user.id` on the top
    agent span only)."""
    assert detect("PG121", redo_trace()) == []


def test_a_failed_call_may_be_retried_by_the_receiver() -> None:
    b = TraceBuilder(agent="triage")
    b.tool("get_account", {"customer_id": CUSTOMER}, error="timeout")
    with b.inside(b.agent("billing")):
        b.tool("get_account", {"customer_id": CUSTOMER})
    assert detect("PG119", b.build()) == []


def test_the_receivers_calls_without_arguments_leave_redo_and_undo_undecided() -> None:
    b = TraceBuilder(agent="triage")
    b.tool("open_ticket", {"customer_id": CUSTOMER})
    with b.inside(b.agent("billing")):
        b.tool("open_ticket", None)
        b.tool("close_ticket", None)
    for code, params in (("PG119", None), ("PG120", {"close_ticket": "open_ticket"})):
        (finding,) = detect(code, b.build(), params)
        assert finding.kind == "cannot_decide" and finding.details["missing"] == "tool_arguments"


def test_an_unknown_receiver_output_leaves_asked_again_undecided() -> None:
    b = workflow()
    with b.inside(b.agent("triage")):
        b.tool("get_account", {"customer_id": CUSTOMER})
        b.handoff("billing")
    with b.inside(b.agent("billing")):
        b.chat(calls=[])  # neither captured nor recorded output
    (finding,) = detect("PG121", b.build())
    assert finding.kind == "cannot_decide" and finding.details["missing"] == "output_messages"


def test_inverses_are_written_directly_or_under_their_key_and_never_a_tools_own() -> None:
    pairs = {"close_ticket": "open_ticket"}
    assert InverseParams.model_validate(pairs).inverses == pairs
    assert InverseParams.model_validate({"inverses": pairs}).inverses == pairs
    backwards = {"open_ticket": "close_ticket"}  # a tool whose name sorts after its inverse's
    assert InverseParams.model_validate(backwards).inverses == backwards
    with pytest.raises(ValidationError, match="cannot be its own inverse: refund"):
        InverseParams.model_validate({"refund": "refund"})


def test_the_limit_of_ping_pong_is_the_policys() -> None:
    assert detect("PG122", ping_pong_trace(3), {"max_alternations": 3}) == []
    assert len(detect("PG122", ping_pong_trace(4), {"max_alternations": 3})) == 1


def test_a_supervisor_calling_a_sub_agent_twice_is_no_ping_pong() -> None:
    b = TraceBuilder(agent="supervisor")
    for _ in range(4):
        with b.inside(b.agent("researcher")):
            b.chat(text="notes")
    assert detect("PG122", b.build()) == []


@pytest.mark.parametrize("privacy", ["captured", "default"])
def test_a_clean_handoff_raises_nothing_under_the_default_policy(privacy: str) -> None:
    """Through the collector's facts, with content captured (scrubbed) or dropped."""
    b = workflow()
    triage = {genai.ENDUSER_ID: CUSTOMER}
    with b.inside(b.agent("triage", triage)):
        b.chat(calls=[("h1", "transfer_to_billing")], attributes=triage)
        b.handoff("billing", "triage")
    with b.inside(b.agent("billing", triage)):
        b.chat(calls=[("c1", "get_account")], attributes=triage)
        b.tool("get_account", {"customer_id": CUSTOMER}, call_id="c1", effect="read")
        b.chat(text="You are on the Plus plan.", attributes=triage)
    trace = b.build()
    trace = facts_only(trace, scrub=privacy == "captured")
    assert run_detectors(trace, default_policy().resolve()) == []


@pytest.mark.parametrize("privacy", ["captured", "default"])
def test_a_receivers_call_of_a_tool_the_sender_never_called_is_decided(privacy: str) -> None:
    """The sender's calls of other tools, whose arguments are unknown, leave it decided
    (names sorting before and after the receiver's tool)."""
    unknown = [("add_note", None), ("zap_cache", None)]
    view = facts_only if privacy == "default" else (lambda t: t)
    assert detect("PG119", view(handed_calls(unknown, [account()]))) == []


@pytest.mark.parametrize("privacy", ["captured", "default"])
def test_a_receivers_call_with_other_arguments_than_each_of_the_senders_is_no_redo(
    privacy: str,
) -> None:
    """The receiver's arguments lie between those of the sender's two calls (by value and
    by fingerprint): only the same arguments are a repeat."""
    view = facts_only if privacy == "default" else (lambda t: t)
    trace = handed_calls([account("cust-3"), account("cust-6")], [account("cust-4")])
    assert detect("PG119", view(trace)) == []


def test_a_slot_outside_the_shared_lexicon_is_refused_naming_it_and_the_lexicon() -> None:
    with pytest.raises(ValidationError, match=r"unknown slot\(s\) iban, pin; the lexicon has "
                       r"account, order, email, phone, ticket"):  # fmt: skip
        ContextParams.model_validate({"slots": {"pin": ("pin",), "iban": ("iban",), "order": ()}})
    assert ContextParams.model_validate({"slots": {"order": ("order",)}}).slots == {
        "order": ("order",)
    }


def test_a_ping_pong_limit_below_one_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_alternations"):
        PingPongParams.model_validate({"max_alternations": 0})


def spliced(base: Trace, other: Trace, tool: str, last: bool = False) -> Trace:
    """`base` with the spans of `tool` (its last span only, with `last`) taken from `other`
    (the same turn seen otherwise)."""
    ids = [b.span_id for b in base.spans if b.genai.tool_name == tool]
    taken = set(ids[-1:] if last else ids)
    spans = [o if b.span_id in taken else b
             for b, o in zip(base.spans, other.spans, strict=True)]  # fmt: skip
    return Trace(base.tenant, base.trace_id, spans)


def test_an_undo_across_a_collector_and_no_collector_is_read_by_the_captured_values() -> None:
    """triage's spans went through the collector (fingerprints, content captured), billing's
    did not (captured arguments only): the two calls are compared by their values."""
    for same, expected in ((True, ["violation"]), (False, [])):
        raw = undo_trace(same=same)
        mixed = spliced(facts_only(raw, scrub=True), raw, "close_ticket")
        found = detect("PG120", mixed, {"close_ticket": "open_ticket"})
        assert [f.kind for f in found] == expected


@pytest.mark.parametrize(("capture", "expected"), [(False, "cannot_decide"), (True, "violation")])
def test_an_undo_fingerprinted_under_a_rotated_key_is_read_by_values_or_left_undecided(
    capture: bool, expected: str
) -> None:
    """billing's spans went through a collector with another key (after a rotation): the
    fingerprints cannot be compared, so the captured values decide, or nothing does
    (it was quiet: fingerprints of two keys counted as different arguments)."""
    raw = undo_trace()
    rotated = facts_only(raw, scrub=capture, key=OTHER_KEY)
    mixed = spliced(facts_only(raw, scrub=capture), rotated, "close_ticket")
    (found,) = detect("PG120", mixed, {"close_ticket": "open_ticket"})
    assert found.kind == expected


@pytest.mark.parametrize(("capture", "expected"), [(False, "cannot_decide"), (True, "violation")])
def test_a_redo_fingerprinted_under_a_rotated_key_is_read_by_values_or_left_undecided(
    capture: bool, expected: str
) -> None:
    """billing's repeat of get_account went through a collector with another key (after a
    rotation): the signatures of the two calls' fingerprints cannot be compared, so the
    captured values decide, or nothing does (it was quiet: signatures of two keys
    counted as different arguments)."""
    raw = redo_trace()
    rotated = facts_only(raw, scrub=capture, key=OTHER_KEY)
    mixed = spliced(facts_only(raw, scrub=capture), rotated, "get_account", last=True)
    (found,) = detect("PG119", mixed)
    assert found.kind == expected


def test_a_call_under_a_rotated_key_with_other_arguments_is_no_redo() -> None:
    """The values decide: billing looked up another customer, under either key."""
    raw = redo_trace(repeat=False)
    rotated = facts_only(raw, scrub=True, key=OTHER_KEY)
    assert detect("PG119", spliced(facts_only(raw, scrub=True), rotated, "get_account", True)) == []
