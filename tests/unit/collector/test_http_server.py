"""Tests for collector.http_server: which connection makes room, and the connection cap
against the process's open-files limit."""

from __future__ import annotations

import resource

import pytest
from pathgrade.collector import http_server
from pathgrade.collector.http_server import (
    DESCRIPTOR_RESERVE,
    _ConnectionTable,
    connection_cap,
)


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _Connection:
    def __init__(self, name: str) -> None:
        self.name = name
        self.transport = _Transport()


def _table(*phases: str) -> tuple[_ConnectionTable, list[_Connection]]:
    """A full table of len(phases) connections, admitted in order, then moved to their
    phase (in the same order)."""
    table = _ConnectionTable(len(phases))
    connections = [_Connection(f"c{i}") for i in range(len(phases))]
    for connection in connections:
        assert table.admit(connection)  # type: ignore[arg-type]
    for connection, phase in zip(connections, phases, strict=True):
        table.move(connection, phase)  # type: ignore[arg-type]
    return table, connections


def test_a_new_connection_closes_the_longest_idle_one_first() -> None:
    table, (first, second, third) = _table("receiving", "idle", "idle")
    assert table.admit(_Connection("new"))  # type: ignore[arg-type]
    assert [c.transport.closed for c in (first, second, third)] == [False, True, False]
    assert table.phase(second) is None  # type: ignore[arg-type]


def test_without_idle_ones_the_request_arriving_longest_is_closed() -> None:
    table, (first, second, third) = _table("processing", "receiving", "receiving")
    table.move(second, "processing")  # type: ignore[arg-type]
    table.move(second, "receiving")  # type: ignore[arg-type]  # its next request began: newest
    assert table.admit(_Connection("new"))  # type: ignore[arg-type]
    assert [c.transport.closed for c in (first, second, third)] == [False, False, True]


def test_a_new_connection_that_sent_nothing_yet_is_not_taken_for_an_idle_one() -> None:
    table = _ConnectionTable(2)
    first, fresh = _Connection("first"), _Connection("fresh")
    for connection in (first, fresh):
        assert table.admit(connection)  # type: ignore[arg-type]
    table.move(first, "receiving")  # type: ignore[arg-type]  # its first bytes were read
    assert table.admit(_Connection("new"))  # type: ignore[arg-type]
    assert [first.transport.closed, fresh.transport.closed] == [True, False]


def test_a_new_connection_arrives_from_its_accept_not_from_its_first_bytes() -> None:
    table = _ConnectionTable(3)
    connections = [_Connection(f"c{i}") for i in range(3)]
    for connection in connections:
        assert table.admit(connection)  # type: ignore[arg-type]
    for connection in reversed(connections):  # a loaded loop reads their bytes out of order
        table.move(connection, "receiving")  # type: ignore[arg-type]
    assert table.admit(_Connection("new"))  # type: ignore[arg-type]
    assert [c.transport.closed for c in connections] == [True, False, False]


def test_an_idle_connection_between_requests_goes_before_a_new_one() -> None:
    table = _ConnectionTable(2)
    kept_alive, fresh = _Connection("kept_alive"), _Connection("fresh")
    for connection in (kept_alive, fresh):
        assert table.admit(connection)  # type: ignore[arg-type]
    table.move(kept_alive, "processing")  # type: ignore[arg-type]
    table.move(kept_alive, "idle")  # type: ignore[arg-type]  # answered, waiting for more
    assert table.admit(_Connection("new"))  # type: ignore[arg-type]
    assert [kept_alive.transport.closed, fresh.transport.closed] == [True, False]


def test_requests_being_processed_are_never_closed_to_make_room() -> None:
    table, connections = _table("processing", "processing")
    assert not table.admit(_Connection("new"))  # type: ignore[arg-type]
    assert not any(c.transport.closed for c in connections)


def test_the_cap_leaves_room_for_the_rest_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = {"soft": 1024, "hard": 1024}
    monkeypatch.setattr(
        http_server.resource, "getrlimit", lambda _: (limits["soft"], limits["hard"])
    )

    def setrlimit(_: int, values: tuple[int, int]) -> None:
        if values[0] > limits["hard"]:
            raise ValueError("not allowed")
        limits["soft"] = values[0]

    monkeypatch.setattr(http_server.resource, "setrlimit", setrlimit)
    assert connection_cap(4096) == 1024 - DESCRIPTOR_RESERVE  # the hard limit binds
    limits.update(soft=1024, hard=100_000)
    assert connection_cap(4096) == 4096  # raised to what is needed
    assert limits["soft"] == 4096 + DESCRIPTOR_RESERVE
    limits.update(soft=resource.RLIM_INFINITY, hard=resource.RLIM_INFINITY)
    assert connection_cap(4096) == 4096
