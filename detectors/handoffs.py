"""Hand-offs between agents (`content.handoffs`): PG119 a receiving agent redoes the sending
agent's call, PG120 it undoes it, PG121 it lost the context it was handed, PG122 the turn
is handed back and forth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pathgrade.content.fingerprints import same_value
from pathgrade.content.handoffs import AgentRun, Handoff, HandoffFlow
from pathgrade.content.messages import assistant_text, parse_messages
from pathgrade.content.predicates import ASKS
from pathgrade.detectors.finding import Finding
from pathgrade.detectors.registry import Params, Rule, RuleDoc
from pathgrade.detectors.view import DetectorContext, ToolCall, TraceView
from pathgrade.schemas import genai
from pathgrade.schemas.json_text import sorted_text
from pathgrade.schemas.lexicons import ASK_LEXICON
from pathgrade.schemas.model import Span
from pydantic import Field, field_validator, model_validator

_READS = (
    "the turn's agent runs and hand-offs (`content.handoffs`: named agent spans, LangGraph "
    "nodes that call a model, OpenInference handoff spans)"
)


class RedoParams(Params):
    """Tools a receiving agent may repeat."""

    ignore: tuple[str, ...] = Field(
        (),
        description="Tools whose repeat by the receiving agent is expected (a read both "
        "agents make on purpose).",
    )


HANDOFF_REDO = Rule(
    code="PG119",
    layer="hand-off",
    name="handoff-redo",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "After a hand-off, the receiving agent repeats a call the sending agent already "
            "made in the same turn: the same tool with the same arguments (the collector's "
            "fingerprints of each argument; the captured values without them). A sender's "
            "call that failed may be retried by the receiver."
        ),
        why=(
            "The receiver did not get (or did not trust) what the sender had already "
            "found or done: the work is paid twice, and a repeated write may act twice."
        ),
        undecided=(
            "Cannot decide when a receiver's call of a tool the sender also called has "
            "arguments neither captured nor fingerprinted (either call), or fingerprinted "
            "only with another key than the other's (a key rotation) and not captured."
        ),
        fires=(
            "triage calls `get_account(customer_id=c1)`, hands off to billing, which calls "
            "`get_account(customer_id=c1)` again."
        ),
        quiet="billing calls `get_account` for another customer, or a tool triage never called.",
        capture_off="the fingerprints of each call's arguments (`pathgrade.facts.tool.args`).",
        capture_on="the same fingerprints (captured values only where none was recorded).",
    ),
    params=RedoParams,
    policy_key="handoff_redo",
    reads=_READS + "; execute_tool spans: tool name, argument fingerprints, status",
    stability="preview",
)


@HANDOFF_REDO.check
def handoff_redo(view: TraceView, params: RedoParams, context: DetectorContext) -> list[Finding]:
    """Each receiver's call that repeats a successful call its sender made before."""
    findings: list[Finding] = []
    flow = view.handoff_flow
    undecided: list[ToolCall] = []
    for handoff in flow.handoffs:
        sender, receiver = flow.sender(handoff), flow.receiver(handoff)
        earlier = [c for c in _before(view.calls_of(sender), receiver) if not c.failed]
        for call in view.calls_of(receiver):
            if call.name in params.ignore:
                continue
            same_tool = [c for c in earlier if c.name == call.name]
            if not same_tool:
                continue
            if call.signature is None or any(c.signature is None for c in same_tool):
                undecided += [call, *same_tool]
                continue
            verdicts = [(c, _repeats(c, call)) for c in same_tool]
            repeated = next((c for c, verdict in verdicts if verdict), None)
            if repeated is None and any(verdict is None for _, verdict in verdicts):
                undecided += [call, *(c for c, verdict in verdicts if verdict is None)]
            elif repeated is not None:
                findings.append(
                    HANDOFF_REDO.violation(
                        view,
                        f"{receiver.agent} repeated {call.name} with the arguments "
                        f"{sender.agent} had already called it with before the hand-off.",
                        call.span.span_id,
                        details={
                            **_agents(sender, receiver),
                            "tool": call.name,
                            "earlier_span_id": repeated.span.span_id,
                        },
                        identifying=("tool",),
                    )
                )
    if undecided and not findings:
        findings.append(
            HANDOFF_REDO.calls_undecided(
                view, undecided, "tool_arguments", "Arguments not captured or fingerprinted"
            )
        )
    return findings


class InverseParams(Params):
    """Pairs of tools that undo each other; a policy may write the pairs directly
    (`inverses: {close_ticket: open_ticket}`)."""

    inverses: dict[str, str] = Field(
        {},
        description="Tool -> the tool that undoes it (`close_ticket: open_ticket`); either "
        "one undoes the other.",
    )

    @model_validator(mode="before")
    @classmethod
    def _pairs_written_directly(cls, value: Any) -> Any:
        if isinstance(value, dict) and set(value) != {"inverses"}:
            return {"inverses": value}
        return value

    @field_validator("inverses")
    @classmethod
    def _no_tool_its_own_inverse(cls, inverses: dict[str, str]) -> dict[str, str]:
        same = sorted(tool for tool, inverse in inverses.items() if tool == inverse)
        if same:
            raise ValueError(f"a tool cannot be its own inverse: {', '.join(same)}")
        return inverses


HANDOFF_UNDO = Rule(
    code="PG120",
    layer="hand-off",
    name="handoff-undo",
    severity="high",
    doc=RuleDoc(
        finds=(
            "After a hand-off, the receiving agent calls a tool the policy declares as the "
            "inverse of one the sending agent called (`inverses: {close_ticket: "
            "open_ticket}`; either undoes the other) on the same arguments: every argument "
            "the two calls share by name holds the same value (fingerprints), and they "
            "share at least one."
        ),
        why=(
            "The second agent quietly reversed the first one's work: the user is told "
            "both, and the end state is neither."
        ),
        undecided=(
            "Cannot decide when a call's arguments are neither captured nor fingerprinted "
            "(or only with another key than the other's). No `inverses`: it reports nothing."
        ),
        fires=(
            "triage calls `open_ticket(customer_id=c1)`, hands off to billing, which calls "
            "`close_ticket(customer_id=c1)`."
        ),
        quiet="billing closes another customer's ticket, or one it opened itself.",
        capture_off="the fingerprints of each call's arguments (`pathgrade.facts.tool.args`).",
        capture_on="the same fingerprints (captured values only where none was recorded).",
    ),
    params=InverseParams,
    policy_key="inverses",
    reads=_READS + "; execute_tool spans: tool name, argument fingerprints, status",
    stability="preview",
)


@HANDOFF_UNDO.check
def handoff_undo(view: TraceView, params: InverseParams, context: DetectorContext) -> list[Finding]:
    """Each receiver's call that undoes a successful call its sender made before."""
    pairs = {frozenset(pair) for pair in params.inverses.items()}
    if not pairs:
        return []
    findings: list[Finding] = []
    undecided: list[ToolCall] = []
    flow = view.handoff_flow
    for handoff in flow.handoffs:
        sender, receiver = flow.sender(handoff), flow.receiver(handoff)
        earlier = [c for c in _before(view.calls_of(sender), receiver) if not c.failed]
        for call in view.calls_of(receiver):
            for done in (c for c in earlier if frozenset((c.name, call.name)) in pairs):
                same = _same_arguments(done, call)
                if same is None:
                    undecided += [done, call]
                elif same:
                    findings.append(
                        HANDOFF_UNDO.violation(
                            view,
                            f"{receiver.agent} called {call.name}, which undoes the "
                            f"{done.name} {sender.agent} made on the same arguments before "
                            "the hand-off.",
                            call.span.span_id,
                            details={
                                **_agents(sender, receiver),
                                "tool": call.name,
                                "undone": done.name,
                                "undone_span_id": done.span.span_id,
                            },
                            identifying=("tool", "undone"),
                        )
                    )
    if undecided and not findings:
        findings.append(
            HANDOFF_UNDO.calls_undecided(
                view, undecided, "tool_arguments", "Arguments not captured or fingerprinted"
            )
        )
    return findings


DEFAULT_SLOTS: dict[str, tuple[str, ...]] = {
    slot: fragments for slot, (_, fragments) in ASK_LEXICON.items()
}


class ContextParams(Params):
    """Which earlier arguments hold a value the receiving agent may ask the user for."""

    slots: dict[str, tuple[str, ...]] = Field(
        DEFAULT_SLOTS,
        description="Slot of the shared question lexicon (`schemas.lexicons.ASK_LEXICON`) "
        "-> argument-name fragments of a call that holds a value for it.",
    )

    @field_validator("slots")
    @classmethod
    def _known_slots(cls, slots: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        unknown = sorted(set(slots) - set(ASK_LEXICON))
        if unknown:
            known = ", ".join(ASK_LEXICON)
            raise ValueError(f"unknown slot(s) {', '.join(unknown)}; the lexicon has {known}")
        return slots


HANDOFF_CONTEXT = Rule(
    code="PG121",
    layer="hand-off",
    name="handoff-context-lost",
    severity="high",
    doc=RuleDoc(
        finds=(
            "A hand-off after which the receiving agent lacks the context the sending agent "
            "had: (1) the session identity the sender's spans carried (its fingerprint, "
            "`pathgrade.facts.session.fp`) is on none of the receiver's spans, or a "
            "receiver's span carries another one; (2) the same for the conversation id; "
            "(3) the receiver asks the user for a value the turn already had: a model "
            "output of the receiver asks for a slot of the shared question lexicon (an "
            "account, order or ticket number, an e-mail address, a phone number: `asks` "
            "of `pathgrade.facts.output`, or the captured text) while a call made before "
            "the receiver started has an argument for it (a name holding one of the "
            "slot's fragments, with a value). The sender's spans that enclose the "
            "receiver (a delegating agent's own span) are the receiver's context, not "
            "what the sender carried."
        ),
        why=(
            "A hand-off that drops who the user is or what they already said makes the "
            "next agent act on the wrong account or ask again: the user repeats "
            "themselves, or worse, the work lands on someone else's account."
        ),
        undecided=(
            "Cannot decide whether the receiver asked again when one of its model outputs "
            "was neither captured nor recorded by the collector (no `pathgrade.facts."
            "output`). A sender that carried no identity or conversation has none to lose."
        ),
        fires=(
            "triage looked the account up (`customer_id`) and handed off; billing's model "
            "answers 'Could you give me your account number?'."
        ),
        quiet="billing uses the account it was handed and asks nothing the turn had.",
        capture_off=(
            "the identity fingerprints on each span, the conversation ids, the slots the "
            "collector found asked for in each model output (`asks`) and the argument "
            "names of the earlier calls."
        ),
        capture_on="the same facts; captured outputs are matched with the same lexicon.",
    ),
    params=ContextParams,
    policy_key="handoff_context",
    reads=_READS + "; every span's identity fingerprint and conversation id; model spans: "
    "output messages or pathgrade.facts.output (`asks`); execute_tool spans: argument names",
    stability="preview",
)


@HANDOFF_CONTEXT.check
def handoff_context_lost(
    view: TraceView, params: ContextParams, context: DetectorContext
) -> list[Finding]:
    """Identity or conversation lost at a hand-off, or a value asked for again."""
    findings: list[Finding] = []
    unknown_outputs: list[Span] = []
    flow = view.handoff_flow
    for handoff in flow.handoffs:
        sender, receiver = flow.sender(handoff), flow.receiver(handoff)
        for what, read in (("identity", view.identity_of), ("conversation", _conversation)):
            problem = _carried(view, sender, receiver, read)
            if problem:
                findings.append(_lost(view, handoff, sender, receiver, what, problem))
        asked, unknown = _asked_again(view, receiver, params.slots)
        unknown_outputs += unknown
        findings += [
            HANDOFF_CONTEXT.violation(
                view,
                f"{receiver.agent} asked the user for the {slot} after the hand-off from "
                f"{sender.agent}, though a call before it ({held.name}) had it.",
                span.span_id,
                details={
                    **_agents(sender, receiver),
                    "problem": "asked_again",
                    "slot": slot,
                    "held_by_span_id": held.span.span_id,
                },
                identifying=("problem", "slot"),
            )
            for span, slot, held in asked
        ]
    if unknown_outputs and not findings:
        findings.append(
            HANDOFF_CONTEXT.cannot_decide(
                view,
                "output_messages",
                "A receiving agent's model output was neither captured nor recorded: "
                "whether it asked the user again is unknown.",
                [s.span_id for s in unknown_outputs],
            )
        )
    return findings


def _conversation(span: Span) -> str:
    return span.genai.conversation_id


def _carried(view: TraceView, sender: AgentRun, receiver: AgentRun, read: Any) -> str:
    """ "missing" or "different" when what `read` finds on the sender's spans (those not
    enclosing the receiver) is absent from, or other than, what it finds on the
    receiver's spans; "" when it is carried, or the sender carried none."""
    context = view.enclosing(receiver.span)
    carried = {v for s in sender.spans if s.span_id not in context if (v := read(s))}
    if not carried:
        return ""
    received = {v for s in receiver.spans if (v := read(s))}
    if not received:
        return "missing"
    if received - carried:
        return "different"
    return ""


def _lost(
    view: TraceView, handoff: Handoff, sender: AgentRun, receiver: AgentRun, what: str,
    problem: str,
) -> Finding:  # fmt: skip
    if problem == "missing":
        reason = (
            f"The {what} {sender.agent}'s spans carried is on none of {receiver.agent}'s "
            "spans after the hand-off."
        )
    else:
        reason = (
            f"{receiver.agent}'s spans carry another {what} than {sender.agent}'s after "
            "the hand-off."
        )
    return HANDOFF_CONTEXT.violation(
        view,
        reason,
        receiver.span.span_id,
        details={**_agents(sender, receiver), "problem": f"{what}_{problem}", "kind": handoff.kind},
        identifying=("problem",),
    )


def _asked_again(
    view: TraceView, receiver: AgentRun, slots: dict[str, tuple[str, ...]]
) -> tuple[list[tuple[Span, str, ToolCall]], list[Span]]:
    """(model span, slot, the earlier call holding it) for each slot a receiver's model
    output asks for that a call made before the receiver started holds; and the
    receiver's model spans whose output is unknown."""
    earlier = _before(view.tool_calls, receiver)
    found, unknown = [], []
    for span in receiver.spans:
        if span.genai.operation not in genai.MODEL_OPERATIONS:
            continue
        asked = _asks(span)
        if asked is None:
            unknown.append(span)
            continue
        for slot in asked:
            held = next((c for c in earlier if _holds(c, slots.get(slot, ()))), None)
            if held is not None:
                found.append((span, slot, held))
    return found, unknown


def _asks(span: Span) -> tuple[str, ...] | None:
    """The slots a model span's output asks the user for: from its captured text, else
    the collector's record; None when neither says."""
    messages = parse_messages(span.genai.output_messages)
    if messages:
        return tuple(ASKS.hits(assistant_text(messages)))
    output = span.facts.output
    return output.asks if output is not None else None


def _holds(call: ToolCall, fragments: tuple[str, ...]) -> bool:
    """Whether `call` has an argument named with one of `fragments` that holds a value."""
    fps = call.argument_fps or {}
    values = call.arguments or {}
    names = set(fps) | {n for n, v in values.items() if v not in (None, "")}
    return any(f in name.lower() for f in fragments for name in names)


class PingPongParams(Params):
    """How many hand-offs back and forth between two agents a turn may make."""

    max_alternations: int = Field(
        2,
        ge=1,
        description="Hand-offs in a row back and forth between the same two agents a turn "
        "may make (A -> B -> A is 2).",
    )


HANDOFF_PING_PONG = Rule(
    code="PG122",
    layer="hand-off",
    name="handoff-ping-pong",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "A turn handed back and forth between the same two agents more than "
            "`max_alternations` times in a row (A -> B -> A -> B is 3 hand-offs). A "
            "delegation's return to its caller is no hand-off, so a supervisor calling "
            "a sub-agent twice is not a ping-pong."
        ),
        why=(
            "Two agents that keep handing the user to each other each think the other "
            "should answer: the turn burns tokens and time and usually ends without an "
            "answer."
        ),
        undecided="Never: the hand-offs are read from the spans' structure.",
        fires="triage -> billing -> triage -> billing in one turn (limit 2).",
        quiet="triage -> billing -> triage (a question sent back once).",
        capture_off="the agent spans, handoff spans and LangGraph nodes (no content).",
        capture_on="the same.",
    ),
    params=PingPongParams,
    policy_key="handoff_ping_pong",
    reads=_READS,
    stability="preview",
)


@HANDOFF_PING_PONG.check
def handoff_ping_pong(
    view: TraceView, params: PingPongParams, context: DetectorContext
) -> list[Finding]:
    """One finding per run of alternating hand-offs longer than the limit."""
    flow = view.handoff_flow
    findings = []
    chain: list[Handoff] = []
    for handoff in (*flow.handoffs, None):
        if handoff is not None and chain and _back(flow, chain[-1], handoff):
            chain.append(handoff)
            continue
        if len(chain) > params.max_alternations:
            first = chain[0]
            pair = sorted((flow.sender(first).agent, flow.receiver(first).agent))
            findings.append(
                HANDOFF_PING_PONG.violation(
                    view,
                    f"The turn was handed back and forth between {pair[0]} and {pair[1]} "
                    f"{len(chain)} times in a row (limit {params.max_alternations}).",
                    chain[params.max_alternations].span.span_id,
                    details={"agents": pair, "handoffs": len(chain)},
                    identifying=("agents",),
                )
            )
        chain = [handoff] if handoff is not None else []
    return findings


def _back(flow: HandoffFlow, previous: Handoff, handoff: Handoff) -> bool:
    """Whether `handoff` hands back to the agent `previous` handed from."""
    return (
        flow.sender(handoff).agent == flow.receiver(previous).agent
        and flow.receiver(handoff).agent == flow.sender(previous).agent
    )


def _repeats(done: ToolCall, call: ToolCall) -> bool | None:
    """Whether `call` repeats `done`: the same signature (tool and arguments). Signatures
    of argument fingerprints made with different keys (a key rotation between the two
    calls) tell nothing: the calls are then compared as PG120 compares them
    (`_same_arguments`: by their captured values, else None: cannot tell)."""
    if done.signature == call.signature:
        return True
    fingerprints, others = done.argument_fps, call.argument_fps
    keys_apart = (
        fingerprints and others and fingerprints.keys() == others.keys()
        and _same_by(fingerprints, others, same_value) is None
    )  # fmt: skip
    return _same_arguments(done, call) if keys_apart else False


def _same_arguments(done: ToolCall, call: ToolCall) -> bool | None:
    """Whether every argument the two calls share by name holds the same value (and they
    share one): by fingerprints where both have them made with the same key, else by
    captured values; None when neither tells."""
    by_fingerprints = _same_by(done.argument_fps, call.argument_fps, same_value)
    if by_fingerprints is not None:
        return by_fingerprints
    return _same_by(done.arguments, call.arguments, _same_text)


def _same_by(
    first: dict[str, Any] | None,
    second: dict[str, Any] | None,
    same: Callable[[Any, Any], bool | None],
) -> bool | None:
    """Whether every argument `first` and `second` share by name holds the same value by
    `same` (True, False, or None: cannot tell), and they share one; None when either is
    unknown or `same` cannot tell for an argument and no other differs."""
    if first is None or second is None:
        return None
    shared = set(first) & set(second)
    verdicts = [same(first[n], second[n]) for n in shared]
    if not shared or False in verdicts:
        return False
    return None if None in verdicts else True


def _same_text(left: Any, right: Any) -> bool:
    """Whether two captured values are the same JSON value."""
    return sorted_text(left) == sorted_text(right)


def _before(calls: list[ToolCall], receiver: AgentRun) -> list[ToolCall]:
    """The calls of `calls` that started before the receiver's run."""
    return [c for c in calls if c.span.start_ns < receiver.start_ns]


def _agents(sender: AgentRun, receiver: AgentRun) -> dict[str, str]:
    return {"sender": sender.agent, "receiver": receiver.agent}
