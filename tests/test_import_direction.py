"""Imports point down the layout table, no plane imports another, no circle between rooms
(pathgrade/cli/layout.py holds the rules, tests/support/imports.py checks the sources against
them), and SQL text lives only in the store room and the migrations
(tests/support/sql_text.py). Pure: the sources are parsed, never imported."""

from __future__ import annotations

from pathlib import Path

from pathgrade.cli import layout
from tests.support.imports import library_violations, module_imports, source_modules, violations
from tests.support.paths import REPO_ROOT
from tests.support.sql_text import sql_holders, sql_literals


def test_the_code_base_keeps_the_house_rules() -> None:
    graph = source_modules(REPO_ROOT)
    assert len(graph) > 100  # every package folder was read
    assert violations(graph) == []
    assert library_violations(graph) == []


def test_a_library_the_bottom_layer_may_not_use_is_reported() -> None:
    graph = {
        "pathgrade.schemas.consumer": {"kafka", "kafka.structs", "json", "pydantic"},
        "pathgrade.transport.consumer": {"kafka", "pathgrade.schemas.model"},
        "pathgrade.schemas.model": set(),
    }
    assert library_violations(graph) == [
        "pathgrade.schemas.consumer imports kafka: schemas may not import kafka",
        "pathgrade.schemas.consumer imports kafka.structs: schemas may not import kafka",
    ]
    assert violations(graph) == []


def test_an_upward_import_a_plane_importing_a_plane_and_a_circle_are_each_reported() -> None:
    graph = {
        "pathgrade.schemas.model": {"pathgrade.detectors.view"},  # up
        "pathgrade.detectors.view": {"pathgrade.schemas.model"},
        "pathgrade.realtime_plane.plane": {"pathgrade.batch_plane.store.client"},  # sideways
        "pathgrade.batch_plane.store.client": set(),
        "pathgrade.batch_plane.scoring.judge": {"pathgrade.batch_plane.evaluation.gate"},
        "pathgrade.batch_plane.evaluation.gate": {"pathgrade.batch_plane.scoring.judge"},
        "pathgrade.web.ui": {"pathgrade.stack.status"},
        "pathgrade.stack.status": set(),
        "pathgrade.cli.gate": {"pathgrade.cli.datasets"},  # command modules never import each other
        "pathgrade.cli.datasets": set(),
    }
    found = violations(graph)
    assert found == [
        "pathgrade.batch_plane.scoring.judge imports pathgrade.batch_plane.evaluation.gate: "
        "batch_plane.scoring may not import batch_plane.evaluation",
        "pathgrade.cli.gate imports pathgrade.cli.datasets: cli.gate may not import cli.datasets",
        "pathgrade.realtime_plane.plane imports pathgrade.batch_plane.store.client: "
        "realtime_plane may not import batch_plane.store",
        "pathgrade.schemas.model imports pathgrade.detectors.view: "
        "schemas may not import detectors",
        "pathgrade.web.ui imports pathgrade.stack.status: web may not import stack",
        "circle between rooms: batch_plane.evaluation -> batch_plane.scoring -> "
        "batch_plane.evaluation",
        "circle between rooms: detectors -> schemas -> detectors",
    ]


def test_the_definitions_import_no_algorithm_over_content() -> None:
    graph = {
        "pathgrade.schemas.facts": {"pathgrade.content.messages"},  # a definition reaching up
        "pathgrade.content.messages": {"pathgrade.schemas.json_text"},
        "pathgrade.schemas.json_text": set(),
        "pathgrade.content.otlp": {"pathgrade.transport.consumer"},  # content above transport
        "pathgrade.transport.consumer": {"pathgrade.content.otlp"},
    }
    assert violations(graph) == [
        "pathgrade.content.otlp imports pathgrade.transport.consumer: "
        "content may not import transport",
        "pathgrade.schemas.facts imports pathgrade.content.messages: "
        "schemas may not import content",
        "circle between rooms: content -> schemas -> content",
        "circle between rooms: content -> transport -> content",
    ]


def test_lazy_and_relative_imports_are_read() -> None:
    source = "def f():\n    from pathgrade.stack import status\n\nfrom . import sibling\n"
    found = module_imports(source, "pathgrade.web.ui", is_package=False)
    assert {"pathgrade.stack", "pathgrade.stack.status", "pathgrade.web.sibling"} <= found


def test_sql_text_lives_only_in_the_store_room_and_the_migrations() -> None:
    strays = {path: found[0] for path, found in sql_holders(REPO_ROOT).items()}
    assert strays == {}, "SQL outside batch_plane/store/: call a typed query of the store room"


def test_a_stray_statement_is_reported_and_prose_is_not() -> None:
    source = (
        '"""SELECT in a docstring is prose."""\n'
        "def rows(store, where):\n"
        '    """Rows: FROM a docstring too."""\n'
        '    help_text = "the SQL, e.g. SELECT count() FROM spans"\n'
        "    return store.query(\n"
        '        f"SELECT Code, count() FROM alerts FINAL WHERE {where} "\n'
        '        " GROUP BY Code", {}\n'  # one literal with the line before
        "    )\n"
        'DDL = "ALTER TABLE spans ADD COLUMN X String"\n'
        'EXPRESSION = " AND Tenant = {t:String}"\n'  # a condition alone is no statement
    )
    assert sql_literals(source) == [
        (6, "SELECT Code, count() FROM alerts FINAL WHERE {}  GROUP BY Code"),
        (9, "ALTER TABLE spans ADD COLUMN X String"),
    ]


def test_sql_in_a_plane_is_found_and_sql_in_the_store_room_is_not(tmp_path: Path) -> None:
    statement = 'ROWS = "SELECT 1 FROM alerts"\n'
    for module in ("realtime_plane/delivery.py", "batch_plane/store/alerts.py"):
        (tmp_path / module).parent.mkdir(parents=True)
        (tmp_path / module).write_text(statement)
    assert sql_holders(tmp_path) == {"realtime_plane/delivery.py": [(1, "SELECT 1 FROM alerts")]}


def test_every_room_imports_only_its_own_folder_and_the_folders_before_it() -> None:
    seen: set[str] = set()
    late: list[str] = []
    for folder in layout.FOLDERS:
        own = layout.expanded(room.name for room in folder.rooms)
        seen |= own
        rules = layout.allowed()
        late += [f"{room} may import {sorted(rules[room] - seen)}" for room in sorted(own)
                 if rules[room] - seen]  # fmt: skip
    assert late == []


def test_every_declared_room_holds_modules_and_every_module_is_in_one() -> None:
    graph = source_modules(REPO_ROOT)
    assert set(layout.allowed()) == {layout.room_of(module) for module in graph}


def test_a_module_in_no_declared_room_is_reported() -> None:
    graph = {
        "pathgrade.cli.newcommand": {"pathgrade.schemas.model"},
        "pathgrade.schemas.model": set(),
    }
    assert violations(graph) == [
        "pathgrade.cli.newcommand is in no room of pathgrade.cli.layout (cli.newcommand)"
    ]


def test_the_layout_table_names_each_folder_and_what_it_may_import() -> None:
    rows = layout.layout_table().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| " + (f.path if f.path.startswith("`") else f"`{f.path}`") for f in layout.FOLDERS
    ]
    cells = {row.split(" | ")[0][2:]: row.split(" | ")[2] for row in rows}
    assert cells["`batch_plane/export/`"] == (
        "`schemas/`, `content/`, `transport/`, `batch_plane/store/` |"
    )
    assert cells["`content/`"] == "`schemas/`; libraries: `opentelemetry`, `google` |"
    assert cells["`schemas/`"].startswith("nothing of ours; libraries: `pydantic`")
    assert cells["`pathgrade/web/`"] == "the folders above but `pathgrade/demo/` |"
    assert (
        "`main`: the folders above and `cli`, `cli.<helper>`, `cli.<command>`"
        in (cells["`pathgrade/cli/`"])
    )
    assert cells["`tests/`"] == "- |"
