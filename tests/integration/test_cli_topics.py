"""`pathgrade topics` creates every pathgrade topic on a real broker, once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from pathgrade.schemas.topics import ALL_TOPICS

from pathgrade.stack.broker import LocalBroker

pytestmark = pytest.mark.integration


def topics(bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "topics", "--kafka", bootstrap, *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_topics_creates_the_missing_ones_with_the_partitions_asked_for(tmp_path: Path) -> None:
    broker = LocalBroker(log_path=tmp_path / "broker.log")
    broker.start()
    try:
        first = topics(broker.bootstrap, "--partitions", "6")
        again = topics(broker.bootstrap)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        partitions = {t: consumer.partitions_for_topic(t) for t in ALL_TOPICS}
        consumer.close()
    finally:
        broker.stop()
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"topics created: {', '.join(ALL_TOPICS)};")
    assert partitions == {t: set(range(6)) for t in ALL_TOPICS}
    assert again.returncode == 0 and "topics created: none;" in again.stdout
    unreachable = topics("127.0.0.1:1")
    assert unreachable.returncode != 0 and "127.0.0.1:1" in unreachable.stderr
