"""`free_port`: ports no outgoing connection can take before their listener binds them."""

from __future__ import annotations

import socket

import pytest

from pathgrade.stack import broker
from pathgrade.stack.broker import free_port


def test_ports_come_from_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    start = broker._ephemeral_ports_start()
    if start <= broker._LOWEST_DRAWN_PORT:
        pytest.fail(f"this Linux machine should say where its ephemeral ports start ({start})")
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(broker._LOWEST_DRAWN_PORT <= port < start for port in ports)


def test_a_held_port_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    draw = broker.random.randrange
    draws: list[int] = []

    def held_port_twice_then_any(low: int, high: int) -> int:
        draws.append(taken if len(draws) < 2 else draw(low, high))
        return draws[-1]

    with socket.create_server(("127.0.0.1", 0)) as held:
        taken = held.getsockname()[1]
        monkeypatch.setattr(broker, "_ephemeral_ports_start", lambda: 65_000)
        monkeypatch.setattr(broker.random, "randrange", held_port_twice_then_any)
        port = free_port()
    assert port != taken and draws[:2] == [taken, taken] and len(draws) >= 3


def test_without_a_known_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    ephemeral_start = broker._ephemeral_ports_start()
    monkeypatch.setattr(broker, "_ephemeral_ports_start", lambda: 0)
    port = free_port()
    assert port >= ephemeral_start  # the kernel's bind(0) pick, from its ephemeral range
    with socket.create_server(("127.0.0.1", port)):  # free: it binds
        pass
