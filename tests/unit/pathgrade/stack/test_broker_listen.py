"""The bundled broker must listen on loopback only (it has no authentication): the
listening sockets of a port are read from the kernel's tables, in IPv4 and IPv6."""

from __future__ import annotations

import socket

import pytest

from pathgrade.stack.broker import listening_addresses


@pytest.mark.parametrize(
    ("family", "host"),
    [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"),
     (socket.AF_INET6, "::1"), (socket.AF_INET6, "::")],
)  # fmt: skip
def test_the_listening_address_of_a_port_is_read_from_the_kernel(family: int, host: str) -> None:
    with socket.create_server((host, 0), family=family) as server:
        port = server.getsockname()[1]
        assert listening_addresses(port) == {host}
    assert listening_addresses(port) == set()  # closed: nothing listens
