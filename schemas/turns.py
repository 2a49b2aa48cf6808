"""TurnDigest: one JSON document on topic `pathgrade.turns`, what a later turn of a
conversation may know about an earlier one.

The realtime consumers of one group publish a digest of every conversation turn they
evaluate and read the others', so a turn sees its conversation's earlier turns whichever
consumer evaluated them. The detectors read earlier turns only through these digests
(`detectors.view.DetectorContext.history`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ConfirmedAction(BaseModel):
    """A `pathgrade.confirmed_action` the user approved: a tool name and its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: dict[str, Any]


class TurnDigest(BaseModel):
    """One evaluated turn of a conversation, reduced to what later turns' detectors read:
    the tools it called successfully (PG106 ordering across turns) and the action the user
    confirmed on it (PG111 confirmation from an earlier turn)."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = 1
    tenant: str
    conversation_id: str
    trace_id: str
    start_ns: int  # the turn's earliest span start: later turns see turns that started earlier
    succeeded_tools: list[str]  # names of its tool calls that did not fail, in start order
    confirmed_actions: list[ConfirmedAction]

    def to_json(self) -> bytes:
        """The wire form: UTF-8 JSON."""
        return self.model_dump_json().encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> TurnDigest:
        """Parse the wire form; raises pydantic.ValidationError naming the bad field."""
        return cls.model_validate_json(data)
