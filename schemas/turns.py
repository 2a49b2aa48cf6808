"""TurnDigest: what a later turn of a conversation may know about an earlier one; TurnBatch:
the JSON document on topic `pathgrade.turns`, the digests one consumer published at once.

The realtime consumers of one group publish a digest of every conversation turn they
evaluate and read the others', so a turn sees its conversation's earlier turns whichever
consumer evaluated them. The detectors read earlier turns only through these digests
(`detectors.view.DetectorContext.history`). A batch carries many digests because a Kafka
record costs the client far more than a digest's bytes (`bench/turn_sharing.py`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

TURNS_SCHEMA_VERSION = 1


class ConfirmedAction(BaseModel):
    """A `pathgrade.confirmed_action` the user approved: a tool name and its arguments, as
    captured values and/or as the collector's fingerprints of them (`schemas.facts`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: dict[str, Any] | None = None  # None: the values were not captured
    argument_fps: dict[str, str] | None = None  # argument name -> fingerprint of its value


class TurnDigest(BaseModel):
    """One evaluated turn of a conversation (`content.agent_turns`: a trace may hold
    several, each its own digest), reduced to what later turns' detectors read:
    the tools it called successfully (PG106 ordering across turns), the action the user
    confirmed on it (PG111 confirmation from an earlier turn) and its walk through an agent
    graph (PG118 across turns, `walk: conversation`; absent from digests of older writers)."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    conversation_id: str
    trace_id: str
    start_ns: int  # the turn's top span's start: later turns see turns that started earlier
    succeeded_tools: list[str]  # names of its tool calls that did not fail, in start order
    confirmed_actions: list[ConfirmedAction]
    graph_nodes: list[str] = []  # the graph nodes the turn visited, in order
    span_id: str = ""  # the turn's top span (a trace may hold several turns; "": older writers)


class TurnBatch(BaseModel):
    """One `pathgrade.turns` message: digests of turns one consumer evaluated, in the order
    it evaluated them."""

    schema_version: int = TURNS_SCHEMA_VERSION
    turns: list[TurnDigest]

    @staticmethod
    def encode(digests_json: list[bytes]) -> bytes:
        """The wire form (UTF-8 JSON) of a batch, from its digests' own JSON
        (`TurnDigest.model_dump_json`), so a publisher sizes its batch as it goes."""
        head = b'{"schema_version":%d,"turns":[' % TURNS_SCHEMA_VERSION
        return head + b",".join(digests_json) + b"]}"

    @classmethod
    def from_json(cls, data: bytes | str) -> TurnBatch:
        """Parse the wire form; raises pydantic.ValidationError naming the bad field."""
        return cls.model_validate_json(data)
