"""When the store writer writes its batch (`flush_due`): full, quiet, old, and under load
grown for the SQL path."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.store.writer import flush_due
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig

NEVER = float("inf")  # the writer has not inserted yet
CONFIG = StoreWriterConfig(
    bootstrap_servers="k:9092", max_batch_spans=50_000, max_batch_age_s=2.0,
    idle_flush_s=0.25, sql_batch_age_s=5.0, sql_insert_min_spans=20_000,
)  # fmt: skip


@pytest.mark.parametrize("sql", [True, False])
def test_a_full_batch_is_written_at_once(sql: bool) -> None:
    assert flush_due(CONFIG, 50_000, 0.1, quiet_s=0.0, sql=sql, since_insert_s=NEVER)


@pytest.mark.parametrize("sql", [True, False])
def test_a_quiet_stream_is_written_once_no_message_came_for_idle_flush(sql: bool) -> None:
    assert not flush_due(CONFIG, 30_000, 1.0, quiet_s=0.2, sql=sql, since_insert_s=NEVER)
    assert flush_due(CONFIG, 30_000, 1.0, quiet_s=0.3, sql=sql, since_insert_s=NEVER)
    assert flush_due(CONFIG, 10, 0.3, quiet_s=0.3, sql=sql, since_insert_s=NEVER)


@pytest.mark.parametrize("sql", [True, False])
def test_a_quiet_stream_waits_for_max_batch_age_after_the_previous_insert(sql: bool) -> None:
    # a light stream of requests with pauses between them: one insert per max_batch_age_s
    assert not flush_due(CONFIG, 500, 0.3, quiet_s=0.3, sql=sql, since_insert_s=1.0)
    assert flush_due(CONFIG, 1_000, 1.25, quiet_s=0.3, sql=sql, since_insert_s=2.0)
    # a full or an old batch does not wait for it
    assert flush_due(CONFIG, 50_000, 0.3, quiet_s=0.3, sql=sql, since_insert_s=0.3)
    assert flush_due(CONFIG, 500, 2.0, quiet_s=0.3, sql=sql, since_insert_s=0.1)


def test_a_light_stream_is_written_at_max_batch_age() -> None:
    # 2,000 spans/s reaches 10,000 by 5 s: short of the SQL path, so no reason to wait
    assert not flush_due(CONFIG, 3_900, 1.95, quiet_s=0.0, sql=True, since_insert_s=NEVER)
    assert flush_due(CONFIG, 4_000, 2.0, quiet_s=0.0, sql=True, since_insert_s=NEVER)


def test_without_the_sql_path_every_batch_is_written_at_max_batch_age() -> None:
    assert flush_due(CONFIG, 30_000, 2.0, quiet_s=0.0, sql=False, since_insert_s=NEVER)


def test_a_stream_heading_for_the_sql_path_grows_until_sql_batch_age() -> None:
    # 5,000 spans/s: 10,000 at 2 s, on its way to 25,000 by 5 s
    assert not flush_due(CONFIG, 10_000, 2.0, quiet_s=0.0, sql=True, since_insert_s=NEVER)
    assert not flush_due(CONFIG, 24_000, 4.9, quiet_s=0.0, sql=True, since_insert_s=NEVER)
    assert flush_due(CONFIG, 25_000, 5.0, quiet_s=0.0, sql=True, since_insert_s=NEVER)


def test_a_batch_already_big_enough_for_the_sql_path_still_grows_until_sql_batch_age() -> None:
    assert not flush_due(CONFIG, 30_000, 3.0, quiet_s=0.0, sql=True, since_insert_s=NEVER)
    assert flush_due(CONFIG, 49_000, 5.0, quiet_s=0.0, sql=True, since_insert_s=NEVER)


def test_a_stream_that_slowed_down_is_written_once_it_cannot_reach_the_sql_path() -> None:
    # 12,000 spans in 3 s projects 20,000 at 5 s: waits; 12,000 in 3.1 s does not
    assert not flush_due(CONFIG, 12_000, 3.0, quiet_s=0.0, sql=True, since_insert_s=NEVER)
    assert flush_due(CONFIG, 12_000, 3.1, quiet_s=0.0, sql=True, since_insert_s=NEVER)
