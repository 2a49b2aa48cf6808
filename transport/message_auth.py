"""Which Kafka messages the stack's own processes wrote: an HMAC-SHA256 under a per-stack
secret (`MessageKey`) over what a message says, carried in its MAC_HEADER.

Anyone who can reach a broker can read its messages, so a plain secret in a header would
leak with the first message; a MAC does not. It covers the topic (a turn digest cannot
pass for a sample), the key, the value and every other header (the tenant and the receive
time of `pathgrade.spans`, the worker of `pathgrade.turns`), each length-prefixed, so no
part can be moved into another. The collector signs what it sends to `pathgrade.spans`,
the realtime plane its alerts, samples and turn digests, a replay what it re-publishes;
the store writer, the realtime plane and the online scorer refuse (count, and commit past)
a message whose MAC is missing or wrong (`transport.consumer.authentic`). A copy of a
message the stack signed is accepted again, which at-least-once delivery allows anyway.

`pathgrade up` with its bundled broker makes a fresh key each start, hands it to its
processes and writes it to `message.key` in its owner-only data directory (named in
`stack.json`, for commands and boxes that join the stack's broker); with `--kafka` and for
the production boxes the key is optional: $PATHGRADE_KAFKA_MESSAGE_KEY_FILE names a file of
64 hex characters every box of the deployment reads (without it nothing is signed or
checked; secure the cluster itself).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

from pathgrade.schemas.topics import MAC_HEADER
from pathgrade.transport.kafka_settings import KAFKA_SETTINGS_PREFIX
from pydantic import AfterValidator, SecretStr

KEY_BYTES = 32
MESSAGE_KEY_FILE_ENV = KAFKA_SETTINGS_PREFIX + "MESSAGE_KEY_FILE"
MESSAGE_KEY_FILE = "message.key"  # in `pathgrade up`'s data directory
Headers = Sequence[tuple[str, bytes | None]]
_ABSENT = (2**64 - 1).to_bytes(8, "big")  # the length prefix of a missing key or value


class MessageKey:
    """A per-stack secret that signs and checks messages (never printed)."""

    __slots__ = ("_keyed", "_secret")

    def __init__(self, secret: bytes) -> None:
        if len(secret) != KEY_BYTES:
            raise ValueError(f"a message key is {KEY_BYTES} bytes, got {len(secret)}")
        self._secret = secret
        self._keyed = hmac.new(secret, digestmod=hashlib.sha256)  # copied per message

    @classmethod
    def generate(cls) -> MessageKey:
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_hex(cls, text: str, source: str = "message key") -> MessageKey:
        """The key written as 64 hex characters; ValueError naming `source` otherwise."""
        try:
            secret = bytes.fromhex(text.strip())
        except ValueError:
            secret = b""
        if len(secret) != KEY_BYTES:
            raise ValueError(f"{source}: expected {2 * KEY_BYTES} hex characters")
        return cls(secret)

    @classmethod
    def from_file(cls, path: str | Path) -> MessageKey:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the message key: {exc.strerror}") from exc
        return cls.from_hex(text, str(path))

    def write(self, path: Path) -> None:
        """Write the key to `path` as hex, readable by its owner only (replacing a file
        there: a stack makes a key each start)."""
        temporary = path.with_name(path.name + ".tmp")
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(self.hex + "\n")
        os.replace(temporary, path)

    @property
    def hex(self) -> str:
        return self._secret.hex()

    def __repr__(self) -> str:
        return "MessageKey(<secret>)"

    def mac(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> bytes:
        """The MAC of a message: topic, key, value and its headers but MAC_HEADER, in order."""
        digest = self._keyed.copy()
        for part in (topic.encode(), key, value):
            _feed(digest, part)
        for name, data in headers:
            if name != MAC_HEADER:
                _feed(digest, name.encode())
                _feed(digest, data)
        return digest.digest()

    def signed(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers
    ) -> list[tuple[str, bytes | None]]:
        """`headers` with this key's MAC of the message (in place of any MAC they held)."""
        kept = [(name, data) for name, data in headers if name != MAC_HEADER]
        return [*kept, (MAC_HEADER, self.mac(topic, key, value, kept))]

    def authentic(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers
    ) -> bool:
        """Whether the message carries exactly one MAC, this key's of it."""
        macs = [data for name, data in headers if name == MAC_HEADER]
        return (
            len(macs) == 1
            and macs[0] is not None
            and hmac.compare_digest(macs[0], self.mac(topic, key, value, headers))
        )


def _feed(digest: hmac.HMAC, part: bytes | None) -> None:
    """One length-prefixed part (a distinct prefix for a missing one)."""
    if part is None:
        digest.update(_ABSENT)
        return
    digest.update(len(part).to_bytes(8, "big"))
    digest.update(part)


def _check_hex(secret: SecretStr | None) -> SecretStr | None:
    if secret is not None:
        MessageKey.from_hex(secret.get_secret_value())
    return secret


MessageKeySetting = Annotated[SecretStr | None, AfterValidator(_check_hex)]
"""A config field holding a message key as 64 hex characters (None: no signing)."""
MESSAGE_KEY_HELP = (
    "the stack's message key (64 hex characters): the Kafka messages this process writes "
    "carry its HMAC-SHA256 and those it reads must (others are refused and counted: "
    "`forged_messages`); none: neither. `pathgrade up` with its bundled broker makes its "
    f"own; the boxes also read it from the file ${MESSAGE_KEY_FILE_ENV} names"
)


def message_key(setting: SecretStr | None) -> MessageKey | None:
    """The key of a `MessageKeySetting` (None without one)."""
    return None if setting is None else MessageKey.from_hex(setting.get_secret_value())


def message_key_from_env(environ: Mapping[str, str] = os.environ) -> MessageKey | None:
    """The deployment's key from the file $PATHGRADE_KAFKA_MESSAGE_KEY_FILE names (None
    when it is not set); ValueError naming the variable when the file is not a key."""
    path = environ.get(MESSAGE_KEY_FILE_ENV)
    if not path:
        return None
    try:
        return MessageKey.from_file(path)
    except ValueError as exc:
        raise ValueError(f"{MESSAGE_KEY_FILE_ENV}: {exc}") from exc
