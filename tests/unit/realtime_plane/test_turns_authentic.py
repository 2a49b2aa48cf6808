"""A realtime consumer with the stack's message key reads only the turn digests the stack's
processes signed: a digest another process put on `pathgrade.turns` (a forged confirmation
a later turn would trust) is refused and counted."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kafka import TopicPartition
from pathgrade.realtime_plane.turns import TurnBatcher, TurnFeed
from pathgrade.schemas.topics import TURNS_TOPIC
from pathgrade.schemas.turns import ConfirmedAction, TurnDigest
from pathgrade.transport.message_auth import MessageKey

PARTITION = TopicPartition(TURNS_TOPIC, 0)


@dataclass
class Counts:
    forged_messages: int = 0


class Records:
    """A consumer whose one poll returns `messages` on PARTITION."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages

    def poll(self, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
        del timeout_ms
        messages, self.messages = self.messages, []
        return {PARTITION: messages} if messages else {}


def turn_record(worker: str, key: MessageKey | None, offset: int) -> tuple[SimpleNamespace, Any]:
    """A turns message of `worker` confirming a reset, signed with `key` (none: unsigned)."""
    digest = TurnDigest(
        tenant="acme", conversation_id="c1", trace_id=f"{offset:032x}", start_ns=offset,
        succeeded_tools=[], confirmed_actions=[ConfirmedAction(name="reset", arguments={})],
    )  # fmt: skip
    batcher = TurnBatcher(worker)
    batcher.add(digest)
    (sent,) = batcher.take()
    headers = sent["headers"]
    if key is not None:
        headers = key.signed(TURNS_TOPIC, sent["key"], sent["value"], headers)
    record = SimpleNamespace(key=sent["key"], value=sent["value"], headers=headers, offset=offset)
    return record, digest


def test_only_the_stacks_signed_turns_are_read() -> None:
    stack = MessageKey.generate()
    signed, digest = turn_record("w1", stack, 1)
    unsigned, _ = turn_record("w1", None, 2)
    foreign, _ = turn_record("w1", MessageKey.generate(), 3)
    feed = TurnFeed("127.0.0.1:9", TURNS_TOPIC, "w2", 60.0, stack)
    feed.consumer = Records([unsigned, signed, foreign])  # type: ignore[assignment]
    counts = Counts()
    assert feed.poll(counts) == [digest]
    assert counts == Counts(forged_messages=2)
    keyless = TurnFeed("127.0.0.1:9", TURNS_TOPIC, "w2", 60.0)
    keyless.consumer = Records([unsigned])  # type: ignore[assignment]
    assert len(keyless.poll(Counts())) == 1  # without a key nothing is checked
