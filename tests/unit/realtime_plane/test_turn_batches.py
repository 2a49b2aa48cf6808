"""Turn batches at their bound: a digest that fills a message exactly is shared, and
batches packed from many digests of many sizes each stay within MAX_BATCH_BYTES and are
full (the next batch's first digest would not have fitted)."""

from __future__ import annotations

import random

from pathgrade.realtime_plane.turns import _ENVELOPE_BYTES, MAX_BATCH_BYTES, TurnBatcher
from pathgrade.schemas.turns import ConfirmedAction, TurnDigest


def digest(n: int, note_bytes: int) -> TurnDigest:
    action = ConfirmedAction(name="reset", arguments={"note": "x" * note_bytes})
    return TurnDigest(tenant="acme", conversation_id="c", trace_id=f"{n:032x}",
                      start_ns=n, succeeded_tools=[], confirmed_actions=[action])  # fmt: skip


def size(d: TurnDigest) -> int:
    return len(d.model_dump_json().encode())


def test_a_digest_that_fills_a_message_exactly_is_shared() -> None:
    base = size(digest(1, 0))
    exact = digest(1, MAX_BATCH_BYTES - _ENVELOPE_BYTES - base)
    assert _ENVELOPE_BYTES + size(exact) == MAX_BATCH_BYTES
    batcher = TurnBatcher("w1")
    assert batcher.add(exact)
    (message,) = batcher.take()
    assert len(message["value"]) == MAX_BATCH_BYTES
    assert not batcher.add(digest(2, MAX_BATCH_BYTES - _ENVELOPE_BYTES - base + 1))


def test_batches_are_within_the_bound_and_full() -> None:
    rng = random.Random(41)
    digests = [digest(n, rng.randrange(0, 3000)) for n in range(1500)]
    batcher = TurnBatcher("w1")
    assert all(batcher.add(d) for d in digests)
    values = [m["value"] for m in batcher.take()]
    assert len(values) > 3 and all(len(v) <= MAX_BATCH_BYTES for v in values)
    sizes = iter(size(d) for d in digests)
    counts = []
    for value in values:  # how many digests each batch holds, from the sizes in order
        total, n = _ENVELOPE_BYTES, 0
        while total < len(value):
            total += next(sizes) + (1 if n else 0)
            n += 1
        assert total == len(value)
        counts.append(n)
    assert sum(counts) == len(digests)
    first_of_next = [size(digests[sum(counts[: i + 1])]) for i in range(len(values) - 1)]
    for value, following in zip(values[:-1], first_of_next, strict=True):
        assert len(value) + 1 + following > MAX_BATCH_BYTES
