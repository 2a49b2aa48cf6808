"""`pathgrade up` says it is up only once its consumers read: the embedded stack's start
returns after the store writer and every realtime process joined their consumer groups on
the bundled broker (a fresh broker's first joins take seconds; before, the first spans
sent after "pathgrade is up" waited for them)."""

from __future__ import annotations

from pathlib import Path

from pathgrade.stack.broker import free_port
from pathgrade.stack.embedded import Stack
from pathgrade.stack.options import StackOptions


def test_start_returns_once_every_consumer_joined_its_group(tmp_path: Path) -> None:
    lines: list[str] = []
    options = StackOptions(
        data_dir=tmp_path / "stack",
        collector={"grpc_port": free_port(), "http_port": free_port()},
        realtime_workers=2,
    )
    stack = Stack(options, out=lines.append)
    stack.start()
    try:
        assert stack.unjoined_consumers() == []
        assert any("pathgrade is up" in line for line in lines)
        assert not any("did not join" in line for line in lines)
    finally:
        stack.stop()
