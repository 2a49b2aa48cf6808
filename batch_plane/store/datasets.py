"""Typed reads of the dataset tables (`datasets`: one row per version, `dataset_items`: the
items of each version; both read with `FINAL`): the versions and items
`evaluation.datasets` works on, and the datasets pages' listings, one viewer's rows only."""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.store.tenancy import EVERY_TENANT, Viewer
from pathgrade.schemas.store import ReadableStore

DatasetKey = tuple[str, str, int]
"""(tenant, dataset name, version)."""
_SHOWN_COLUMNS = "Name, Version, Kind, Owner, Description, Status, CreatedAt, PublishedAt"
_ITEM_COLUMNS = "Input, ReferenceAnswer, ExpectedToolCalls, Slices, SourceTraceId, Tags"


def versions(store: ReadableStore, name: str | None = None) -> list[list[Any]]:
    """Every version (of `name`, or of all datasets), by name then version: Name, Version,
    Kind, Owner, Description, Status, CreatedAt and PublishedAt (Unix ms)."""
    where, values = ("WHERE Name = {name:String}", {"name": name}) if name else ("", {})
    return store.query(
        "SELECT Name, Version, Kind, Owner, Description, Status, "
        "toUnixTimestamp64Milli(CreatedAt), toUnixTimestamp64Milli(PublishedAt) "
        f"FROM datasets FINAL {where} ORDER BY Name, Version",
        values,
    ).rows


def item_counts(
    store: ReadableStore, viewer: Viewer = EVERY_TENANT, name: str | None = None
) -> dict[DatasetKey, int]:
    """How many items each version (of `name`, or of all datasets) holds."""
    named = " AND Dataset = {name:String}" if name else ""
    rows = store.query(
        "SELECT Tenant, Dataset, Version, count() FROM dataset_items FINAL "
        f"WHERE {viewer.where('Tenant')}{named} GROUP BY Tenant, Dataset, Version",
        {"name": name, **viewer.parameters} if name else viewer.parameters,
    ).rows
    return {(tenant, dataset, version): n for tenant, dataset, version, n in rows}


def items_of_version(
    store: ReadableStore, name: str, version: int, fields: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """The items of version `version` of `name` by item id (the first `limit`), as column ->
    value of ItemId and `fields` (columns of `dataset_items`)."""
    return _items_of(store, EVERY_TENANT, name, version, fields, limit)


def _items_of(
    store: ReadableStore,
    viewer: Viewer,
    name: str,
    version: int,
    fields: str,
    limit: int | None,
) -> list[dict[str, Any]]:
    return store.query(
        f"SELECT ItemId, {fields} FROM dataset_items FINAL WHERE {viewer.where('Tenant')} "
        "AND Dataset = {name:String} AND Version = {version:UInt32} ORDER BY ItemId"
        + (f" LIMIT {int(limit)}" if limit is not None else ""),
        {"name": name, "version": version, **viewer.parameters},
    ).dicts()


STORED_ITEM_FIELDS = (
    "Input, ReferenceAnswer, ExpectedToolCalls, AlternativeTrajectories, Slices, "
    "SourceTraceId, Tags, Checks, EndState, RegressionCheck, ReferenceContexts"
)
"""Every column of an item `evaluation.datasets` reads back."""


def listed(store: ReadableStore, viewer: Viewer, limit: int) -> list[dict[str, Any]]:
    """The viewer's dataset versions by name, newest version first (the first `limit`):
    the shown columns and Tenant."""
    return store.query(
        f"SELECT {_SHOWN_COLUMNS}, Tenant FROM datasets FINAL WHERE {viewer.where('Tenant')} "
        f"ORDER BY Name, Version DESC LIMIT {int(limit)}",
        viewer.parameters,
    ).dicts()


def version_shown(
    store: ReadableStore, viewer: Viewer, name: str, version: int
) -> dict[str, Any] | None:
    """The shown columns of the viewer's version `version` of `name`; None when it has none."""
    rows = store.query(
        f"SELECT {_SHOWN_COLUMNS} FROM datasets FINAL WHERE {viewer.where('Tenant')} "
        "AND Name = {name:String} AND Version = {version:UInt32}",
        {"name": name, "version": version, **viewer.parameters},
    ).dicts()
    return rows[0] if rows else None


def items_shown(
    store: ReadableStore, viewer: Viewer, name: str, version: int, limit: int
) -> list[dict[str, Any]]:
    """The first `limit` items of the viewer's version (by item id) as the dataset page
    shows them: ItemId, Input, ReferenceAnswer, ExpectedToolCalls, Slices, SourceTraceId,
    Tags."""
    return _items_of(store, viewer, name, version, _ITEM_COLUMNS, limit)


def places_of_item(store: ReadableStore, viewer: Viewer, item_id: str) -> list[dict[str, Any]]:
    """Each version holding item `item_id`, by dataset and version: Dataset, Version and
    the item's Input, ReferenceAnswer, ExpectedToolCalls, Slices, SourceTraceId, Tags."""
    return store.query(
        f"SELECT Dataset, Version, {_ITEM_COLUMNS} FROM dataset_items FINAL "
        f"WHERE {viewer.where('Tenant')} AND ItemId = {{item:String}} ORDER BY Dataset, Version",
        {"item": item_id, **viewer.parameters},
    ).dicts()
