"""The same traffic replayed gives the same findings: a multi-turn mix (a confirmation on
one turn, the irreversible action on the next; some actions on other arguments, some
never confirmed) replayed with each conversation's turns arriving in a different order
within their quiet windows. Turns of a conversation are graded in their own start order
(the assembler holds a later turn back), so whether an earlier confirmation counted never
depends on arrival order."""

from __future__ import annotations

import json
import random

from pathgrade.content.conventions import genai_fields
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.assembler import TurnAssembler
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas import genai
from pathgrade.schemas.model import Span

CONVERSATIONS = 24
SECOND = 10**9


def _span(trace: str, span_id: str, parent: str, name: str, start: int, attributes: dict) -> Span:
    return Span("acme", trace, span_id, parent, name, "Internal", start, start + SECOND // 10,
                "shop", attributes=attributes, genai=genai_fields(name, attributes))  # fmt: skip


def _turns(n: int) -> list[list[Span]]:
    """Conversation `n`: turn 1 confirms `cancel_order` for order n (every third
    conversation confirms nothing), turn 2 runs it (every fourth on another order)."""
    conversation = {genai.CONVERSATION_ID: f"conv-{n}", genai.OPERATION_NAME: "invoke_agent"}
    start = n * 10 * SECOND
    first = dict(conversation)
    if n % 3:
        first[genai.PG_CONFIRMED_ACTION] = json.dumps(
            {"name": "cancel_order", "arguments": {"order_id": f"o{n}"}}
        )
    order = f"o{n}" if n % 4 else "other"
    call = {genai.OPERATION_NAME: "execute_tool", genai.TOOL_NAME: "cancel_order",
            genai.TOOL_CALL_ARGUMENTS: json.dumps({"order_id": order}),
            genai.PG_TOOL_EFFECT: "irreversible"}  # fmt: skip
    one, two = f"{n:016x}{1:016x}", f"{n:016x}{2:016x}"
    return [
        [_span(one, "a1", "", "invoke_agent shop", start, first)],
        [_span(two, "a2", "", "invoke_agent shop", start + 2 * SECOND, conversation),
         _span(two, "t2", "a2", "execute_tool cancel_order", start + 2 * SECOND + 1, call)],
    ]  # fmt: skip


def _replay(seed: int, parent_wait_s: float = 5.0) -> set[tuple[str, str, str]]:
    """Findings (code, trace, span) of one replay: per conversation, turn 2's message and
    turn 1's arrive in a seeded order, at most 0.8 s apart (within the quiet window)."""
    rng = random.Random(seed)
    arrivals = []
    for n in range(CONVERSATIONS):
        base = n * 0.05
        for turn in _turns(n):
            arrivals.append((base + rng.uniform(0.0, 0.8), turn))
    arrivals.sort(key=lambda item: item[0])
    assembler = TurnAssembler(quiet_window_s=1.0, parent_wait_s=parent_wait_s)
    evaluator = TurnEvaluator(load_policy(None))
    found: set[tuple[str, str, str]] = set()
    now, offset = 0.0, 0
    while arrivals or assembler.traces_held:
        while arrivals and arrivals[0][0] <= now:
            _, spans = arrivals.pop(0)
            assembler.add(0, offset, spans, now)
            offset += 1
        for due in assembler.due(now):
            evaluation = evaluator.evaluate(due, 0)
            found |= {(f.code, f.trace_id, f.span_id) for f in evaluation.findings
                      if f.code == "PG111"}  # fmt: skip
        now += 0.05
    return found


def test_replays_in_different_orders_give_the_same_findings() -> None:
    replays = [_replay(seed) for seed in range(6)]
    assert all(replay == replays[0] for replay in replays[1:])
    fired = {trace[:16] for _, trace, _ in replays[0]}
    expected = {f"{n:016x}" for n in range(CONVERSATIONS) if n % 3 == 0 or n % 4 == 0}
    assert fired == expected  # unconfirmed, or confirmed for another order


def test_without_waiting_for_the_earlier_turn_the_order_would_decide() -> None:
    """The same replays with the hold-back cut to nothing: some confirmation counts in one
    order and not in another (the nondeterminism of issue 39)."""
    replays = [_replay(seed, parent_wait_s=1e-9) for seed in range(6)]
    assert any(replay != replays[0] for replay in replays[1:])
