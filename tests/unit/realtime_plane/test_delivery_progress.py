"""PartitionProgress: the webhook's cursor of one partition passes only what was
delivered (or is not in the table), and missing numbers are read back once stored."""

from __future__ import annotations

from pathgrade.realtime_plane.delivery import PartitionProgress, webhook_id


def test_the_cursor_moves_over_what_was_delivered_in_any_order() -> None:
    progress = PartitionProgress.resumed(None, stored=10)  # a new webhook: after the history
    assert (progress.cursor, progress.missing) == (11, [])
    for number in (12, 13, 11):
        progress.delivered(number)
    assert progress.cursor == 14 and progress.done == set()
    progress.delivered(16)
    assert progress.cursor == 14 and progress.done == {16}


def test_a_saved_cursor_behind_the_table_makes_the_rest_missing() -> None:
    progress = PartitionProgress.resumed(4, stored=9)
    assert progress.missing == [[4, 9]] and progress.next_missing() == (4, 9)
    progress.refilled(4, 6, found=[4, 6])  # 5 is not in the table: refused or merged away
    assert progress.missing == [[7, 9]] and progress.cursor == 4
    progress.delivered(4)
    assert progress.cursor == 6  # 5 counted delivered
    progress.delivered(6)
    assert progress.cursor == 7


def test_deferred_numbers_wait_until_the_store_holds_them() -> None:
    progress = PartitionProgress.resumed(1, stored=0)
    for number in (1, 2, 3, 5):
        progress.defer(number)
    assert progress.missing == [[1, 3], [5, 5]]
    assert progress.next_missing() is None  # nothing stored yet
    progress.stored = 2
    assert progress.next_missing() == (1, 2)
    progress.refilled(1, 2, found=[1, 2])
    assert progress.missing == [[3, 3], [5, 5]] and progress.cursor == 1
    progress.defer(0)  # below the cursor: nothing to do
    progress.delivered(1)
    progress.defer(1)  # already delivered
    assert progress.missing == [[3, 3], [5, 5]]


def test_webhook_ids_hide_the_url_and_tell_urls_apart() -> None:
    secret = webhook_id("https://user:secret@hooks.example/alerts")
    assert "secret" not in secret and len(secret) == 16
    assert secret != webhook_id("https://hooks.example/alerts")


def test_the_cursor_saved_never_passes_what_is_stored() -> None:
    """Numbers delivered before they were stored are not counted in the saved cursor: a
    plane killed before storing them leaves them to be given out again."""
    progress = PartitionProgress.resumed(5, stored=4)
    for number in (5, 6, 7):
        progress.delivered(number)
    assert (progress.cursor, progress.cursor_to_save()) == (8, 5)
    progress.stored = 6
    assert progress.cursor_to_save() == 7
    progress.stored = 9
    assert progress.cursor_to_save() == 8
