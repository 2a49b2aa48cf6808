"""Shipped migrations: ordered, parsed into statements, stable checksums."""

from __future__ import annotations

from pathgrade.schemas.migrations import Migration, bundled_migrations

from tests.support.paths import REPO_ROOT


def test_bundled_migrations_are_ordered_and_start_with_spans() -> None:
    migrations = bundled_migrations()
    versions = [m.version for m in migrations]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert migrations[0].name == "spans"
    assert any("CREATE TABLE IF NOT EXISTS spans" in s for s in migrations[0].statements())


def test_statements_split_at_line_end_semicolons_and_drop_comments() -> None:
    migration = Migration(
        9, "x", "-- a comment; not a split\nCREATE TABLE a (s String);\n\nSELECT ';';\n"
    )
    assert migration.statements() == ["CREATE TABLE a (s String)", "SELECT ';'"]
    assert migration.checksum == Migration(9, "x", migration.sql).checksum
    assert migration.checksum != Migration(9, "x", migration.sql + " ").checksum


def test_the_first_minute_in_getting_started_lists_every_bundled_migration() -> None:
    """docs/getting-started.md shows what a first `pathgrade up` prints: every migration."""
    page = (REPO_ROOT / "docs" / "getting-started.md").read_text()
    printed = page.split("applied migrations: ", 1)[1].split("\n", 1)[0].split(", ")
    assert printed == [f"{m.version:04d}_{m.name}" for m in bundled_migrations()]
