"""A message key's MAC covers every part of a message: change the topic, the key, the
value, a header's name or value, or move a byte from one part to the next, and the message
is no longer the stack's."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.schemas.topics import MAC_HEADER
from pathgrade.transport.message_auth import (
    MESSAGE_KEY_FILE_ENV,
    MessageKey,
    message_key_from_env,
)

KEY = MessageKey(bytes(range(32)))
MESSAGE = ("pathgrade.spans", b"ab" * 16, b"value", [("pathgrade.tenant", b"acme")])


def test_a_signed_message_is_authentic_and_every_change_is_not() -> None:
    topic, key, value, headers = MESSAGE
    signed = KEY.signed(topic, key, value, headers)
    assert signed[:-1] == headers and signed[-1][0] == MAC_HEADER
    assert KEY.authentic(topic, key, value, signed)
    changed = [
        ("pathgrade.sampled", key, value, signed),
        (topic, b"ba" * 16, value, signed),
        (topic, None, value, signed),
        (topic, key, b"valuf", signed),
        (topic, key, None, signed),
        (topic, key, value, [("pathgrade.tenant", b"globex"), signed[-1]]),
        (topic, key, value, [("pathgrade.tenanT", b"acme"), signed[-1]]),
        (topic, key, value, [*signed, ("pathgrade.received_at_ns", b"1")]),
        (topic, key + b"v", b"alue", signed),  # a byte moved from the value to the key
        (topic, key, value, signed[-1:]),
        (topic, key, value, headers),
    ]
    assert [KEY.authentic(*message) for message in changed] == [False] * len(changed)
    assert not MessageKey.generate().authentic(topic, key, value, signed)


def test_signing_again_replaces_the_mac() -> None:
    topic, key, value, headers = MESSAGE
    twice = KEY.signed(topic, key, value, KEY.signed(topic, key, value, headers))
    assert [name for name, _ in twice].count(MAC_HEADER) == 1
    assert KEY.authentic(topic, key, value, twice)


def test_keys_are_read_from_hex_and_never_printed(tmp_path: Path) -> None:
    path = tmp_path / "message.key"
    path.write_text(KEY.hex + "\n")
    assert MessageKey.from_file(path).hex == KEY.hex
    assert KEY.hex not in repr(KEY)
    assert message_key_from_env({}) is None
    assert message_key_from_env({MESSAGE_KEY_FILE_ENV: str(path)}).hex == KEY.hex  # type: ignore[union-attr]
    path.write_text("not hex")
    with pytest.raises(ValueError, match=f"{MESSAGE_KEY_FILE_ENV}: .*expected 64 hex"):
        message_key_from_env({MESSAGE_KEY_FILE_ENV: str(path)})
    with pytest.raises(ValueError, match="cannot read"):
        MessageKey.from_file(tmp_path / "missing")


def test_a_written_key_is_the_owners_only_and_a_new_one_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "message.key"
    for key in (KEY, MessageKey.generate()):
        key.write(path)
        assert MessageKey.from_file(path).hex == key.hex
        assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["message.key"]
