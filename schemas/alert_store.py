"""`AlertStore`: what the realtime plane reads and writes of the store, and nothing else:
its numbered alerts in table `alerts` (rows in `ALERT_COLUMNS` + `SEQ_COLUMNS` order), the
webhook's delivery cursors in `webhook_cursors`, and its turn rollups in `monitor_rollups`.

The plane may not import the store room, so it asks through this protocol; the store room
implements it (`batch_plane.store.deliveries.AlertRecords`) and whoever builds the plane
hands one in. Every method raises the store's errors."""

from __future__ import annotations

from typing import Any, Protocol

from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.store import RejectedRow


class AlertStore(Protocol):
    """The realtime plane's tables: numbered alerts, webhook cursors, turn rollups."""

    def latest_numbers(self) -> dict[int, int]:
        """Partition (or stream) -> the highest alert number stored for it."""
        ...

    def alerted_since(self, partitions: set[int], since_ns: int) -> dict[tuple[str, str], set[str]]:
        """(tenant, trace id) -> the keys of the alerts stored for `partitions` found at or
        after `since_ns`."""
        ...

    def numbered_alerts(
        self, partition: int, first: int, last: int, limit: int
    ) -> list[tuple[int, Alert]]:
        """The stored alerts numbered `first`..`last` of `partition`, in order, at most
        `limit` (a number stored twice, once)."""
        ...

    def insert_alerts(self, rows: list[list[Any]]) -> None:
        """Store numbered alert rows; any row the store refuses fails the insert."""
        ...

    def insert_encodable_alerts(self, rows: list[list[Any]]) -> list[RejectedRow]:
        """Store numbered alert rows but those the store cannot encode, which it returns."""
        ...

    def insert_rollups(self, rows: list[list[Any]]) -> None:
        """Store rows of `monitor_rollups` (ROLLUP_COLUMNS order)."""
        ...

    def webhook_cursors(self, webhook: str) -> dict[int, int]:
        """Partition -> the highest cursor saved for `webhook` (its id)."""
        ...

    def save_webhook_cursors(self, webhook: str, cursors: dict[int, int], saved_at_ns: int) -> None:
        """Save `webhook`'s cursors (partition -> first number not delivered)."""
        ...
