"""`SigningProducer`: a Kafka producer whose every message carries the stack's MAC
(`transport.message_auth`), so the stack's consumers can tell its messages from forged ones."""

from __future__ import annotations

from typing import Any

from pathgrade.transport.message_auth import Headers, MessageKey


class SigningProducer:
    """`producer` (a KafkaProducer), each `send` signed with `key`; everything else as the
    producer does it."""

    def __init__(self, producer: Any, key: MessageKey) -> None:
        self.producer = producer
        self.key = key

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Headers | None = None,
        **options: Any,
    ) -> Any:
        """`KafkaProducer.send` with this stack's MAC among the headers."""
        signed = self.key.signed(topic, key, value, headers or ())
        return self.producer.send(topic, value=value, key=key, headers=signed, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.producer, name)


def signing(producer: Any, key: MessageKey | None) -> Any:
    """`producer`, signing with `key` when there is one."""
    return producer if key is None else SigningProducer(producer, key)
