"""Turn batches at their bound: a digest that fills a message exactly is shared, and
batches packed from many digests of many sizes each stay within MAX_BATCH_BYTES and are
full (the next batch's first digest would not have fitted); a consumer skips only the
batches it published itself; the limit is the documented one."""

from __future__ import annotations

import random
import re
from types import SimpleNamespace

import pytest
from pathgrade.realtime_plane.turns import (
    _ENVELOPE_BYTES,
    MAX_BATCH_BYTES,
    TurnBatcher,
    remote_digests,
)
from pathgrade.schemas.turns import ConfirmedAction, TurnDigest

from tests.support.paths import REPO_ROOT


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


@pytest.mark.parametrize("publisher", ["w1", "w3", "w2-b"])
def test_a_consumer_skips_only_its_own_batches(publisher: str) -> None:
    batcher = TurnBatcher(publisher)
    batcher.add(digest(1, 0))
    (sent,) = batcher.take()
    message = SimpleNamespace(**sent, offset=0)
    assert remote_digests(message, "w2") == [digest(1, 0)]
    assert remote_digests(message, publisher) == []


def test_two_digests_that_fill_a_message_exactly_share_it() -> None:
    first = digest(1, 1000)
    room = MAX_BATCH_BYTES - _ENVELOPE_BYTES - size(first) - 1  # less the comma
    second = digest(2, room - size(digest(2, 0)))
    assert _ENVELOPE_BYTES + size(first) + 1 + size(second) == MAX_BATCH_BYTES
    batcher = TurnBatcher("w1")
    assert batcher.add(first) and batcher.add(second)
    (message,) = batcher.take()
    assert len(message["value"]) == MAX_BATCH_BYTES


@pytest.mark.parametrize("note_bytes", [0, 7, 150, 1000])
def test_a_full_batch_of_equal_digests_holds_as_many_as_fit_with_their_commas(
    note_bytes: int,
) -> None:
    same = [digest(n, note_bytes) for n in range(10**15, 10**15 + 4000)]
    each = size(same[0])
    assert {size(d) for d in same} == {each}
    fit = (MAX_BATCH_BYTES - _ENVELOPE_BYTES + 1) // (each + 1)  # n digests, n - 1 commas
    batcher = TurnBatcher("w1")
    assert all(batcher.add(d) for d in same[: 2 * fit])
    first, second = (m["value"] for m in batcher.take())
    assert len(first) == len(second) == _ENVELOPE_BYTES + fit * each + fit - 1
    assert len(first) <= MAX_BATCH_BYTES < len(first) + 1 + each


def test_the_documented_message_limit_is_the_batchers() -> None:
    docs = (REPO_ROOT / "docs" / "realtime.md").read_text()
    (kib,) = set(re.findall(r"at most (\d+) KiB a message", docs))
    assert int(kib) * 1024 == MAX_BATCH_BYTES
