"""The house's import rules as data, and a checker of a module -> imports graph against them.

Every module belongs to a *room*: a layer of DESIGN.md's table (`schemas`, `transport`,
`collector`, `detectors`, `realtime_plane`) or a sub-package of one (`batch_plane.store`,
`pathgrade.cli`, ...). `ALLOWED` says which other rooms a room may import; anything else is
an arrow that points up or sideways. A circle between rooms is reported on its own, so a
rule table that allowed one by mistake would still be caught. `LIBRARIES` says which
libraries beyond the standard library a room may import (rooms not named there: any).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

BOTTOM = {"schemas"}
STATS = {"stats"}
TRANSPORT = {"transport"}
LAYERS = {"schemas", "stats", "transport", "collector", "detectors", "realtime_plane"}
BATCH = {
    "batch_plane.store",
    "batch_plane.agents",
    "batch_plane.scoring",
    "batch_plane.edge",
    "batch_plane.evaluation",
    "batch_plane.export",
}
CLI_HELPERS = {
    "cli.support",
    "cli.output",
    "cli.agents",
    "cli.suite_scoring",
    "cli.alert_follow",
    "cli.progress",
    "cli.parser",
    "cli.reference",
}
CLI_COMMANDS = {
    "cli.stack",
    "cli.boxes",
    "cli.demo",
    "cli.store",
    "cli.alerts",
    "cli.monitors",
    "cli.datasets",
    "cli.edge",
    "cli.gate",
    "cli.scoring",
    "cli.review",
    "cli.ui",
}
DEMO = {"demo.options", "demo.scenarios", "demo.writers", "demo.sender", "demo.pages"}
BELOW_PATHGRADE = LAYERS | BATCH | {"batch_plane"}
PATHGRADE_ROOMS = {"stack", "web", "pathgrade"}

ALLOWED: dict[str, set[str]] = {
    "schemas": set(),
    "stats": set(),
    "transport": BOTTOM,
    "collector": BOTTOM | TRANSPORT,
    "detectors": BOTTOM,
    "realtime_plane": BOTTOM | STATS | TRANSPORT | {"detectors"},
    "batch_plane": set(),
    "batch_plane.store": BOTTOM | TRANSPORT,
    "batch_plane.agents": BOTTOM,
    "batch_plane.scoring": BOTTOM | TRANSPORT | {"detectors", "batch_plane.store"},
    "batch_plane.edge": BOTTOM
    | TRANSPORT
    | {"detectors", "batch_plane.store", "batch_plane.agents", "batch_plane.scoring"},
    "batch_plane.evaluation": BOTTOM
    | STATS
    | TRANSPORT
    | {"detectors", "batch_plane.store", "batch_plane.agents", "batch_plane.scoring"},
    "batch_plane.export": BOTTOM | {"batch_plane.store"},
    "pathgrade": set(),
    "demo": set(),
    "demo.options": set(),
    "demo.scenarios": BOTTOM,
    "demo.writers": BOTTOM | {"demo.options", "demo.scenarios"},
    "demo.sender": BOTTOM
    | {"batch_plane.agents", "demo.options", "demo.scenarios", "demo.writers"},
    "demo.pages": BOTTOM
    | {"batch_plane.agents", "demo.options", "demo.scenarios", "demo.writers", "demo.sender"},
    "web": BELOW_PATHGRADE,
    "stack": BELOW_PATHGRADE | {"web"} | DEMO,
    **{helper: BELOW_PATHGRADE | {"stack", "web"} | DEMO | CLI_HELPERS for helper in CLI_HELPERS},
    **{
        command: BELOW_PATHGRADE | {"stack", "web"} | DEMO | CLI_HELPERS for command in CLI_COMMANDS
    },
    "cli.main": BELOW_PATHGRADE | {"stack", "web", "cli"} | DEMO | CLI_HELPERS | CLI_COMMANDS,
    "cli": set(),
}
"""Room -> the rooms it may import (a room may always import itself)."""

LIBRARIES: dict[str, set[str]] = {
    "schemas": {"pydantic", "opentelemetry", "google"},  # google.protobuf: opentelemetry-proto's
    "stats": {"numpy"},
}
"""Room -> the top-level names of the libraries it may import besides the standard library
and pathgrade (DESIGN.md: the bottom layer imports stdlib, pydantic, opentelemetry-proto)."""

PACKAGE_DIRS = {
    "schemas": "pathgrade.schemas",
    "collector": "pathgrade.collector",
    "detectors": "pathgrade.detectors",
    "transport": "pathgrade.transport",
    "realtime_plane": "pathgrade.realtime_plane",
    "batch_plane": "pathgrade.batch_plane",
    "stats": "pathgrade.stats",
    "pathgrade": "pathgrade",
}
"""Source folder -> the package it installs as (pyproject's package-dir)."""


def room_of(module: str) -> str | None:
    """The room of an installed module name (`pathgrade.batch_plane.edge.graph` ->
    `batch_plane.edge`), None for a module outside pathgrade."""
    parts = module.split(".")
    if parts[0] != "pathgrade":
        return None
    rest = parts[1:]
    if not rest:
        return "pathgrade"
    head = rest[0]
    if head in LAYERS:
        return head
    if head == "batch_plane":
        return f"batch_plane.{rest[1]}" if len(rest) > 1 else "batch_plane"
    if head == "cli":
        if len(rest) == 1:
            return "cli"
        return "cli.main" if rest[1] == "__main__" else f"cli.{rest[1]}"
    if head == "demo":
        return f"demo.{rest[1]}" if len(rest) > 1 else "demo"
    if head in PATHGRADE_ROOMS:
        return head
    return None


def module_imports(source: str, module: str, is_package: bool) -> set[str]:
    """Every module `source` imports, top-level or inside functions (relative ones
    resolved against `module`)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def source_modules(root: Path) -> dict[str, set[str]]:
    """Installed module name -> the modules it imports, for every source file under
    `root`'s package folders."""
    graph: dict[str, set[str]] = {}
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root / folder).with_suffix("")
            parts = [p for p in relative.parts if p != "__init__"]
            module = ".".join([package, *parts])
            graph[module] = module_imports(path.read_text(), module, path.stem == "__init__")
    return graph


def violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Each import that breaks `ALLOWED`, and each circle between rooms, as a sentence."""
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    for module, imported in sorted(graph.items()):
        source = room_of(module)
        if source is None:
            continue
        for target_module in sorted(imported):
            target = room_of(target_module)
            if target is None or target == source or target_module not in graph:
                continue
            edges.setdefault(source, set()).add(target)
            if target not in ALLOWED.get(source, set()):
                problems.append(
                    f"{module} imports {target_module}: {source} may not import {target}"
                )
    problems.extend(f"circle between rooms: {' -> '.join(cycle)}" for cycle in _cycles(edges))
    return problems


def library_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Each import of a library its room's `LIBRARIES` entry does not name, as a sentence."""
    problems: list[str] = []
    for module, imported in sorted(graph.items()):
        room = room_of(module)
        if room not in LIBRARIES:
            continue
        for name in sorted(imported):
            top = name.split(".")[0]
            if top in {"pathgrade", "__future__"} or top in sys.stdlib_module_names:
                continue
            if top not in LIBRARIES[room]:
                problems.append(f"{module} imports {name}: {room} may not import {top}")
    return problems


def _cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """One path per circle found by a depth-first walk of the room graph."""
    cycles: list[list[str]] = []
    state: dict[str, str] = {}

    def walk(room: str, path: list[str]) -> None:
        state[room] = "open"
        for target in sorted(edges.get(room, ())):
            if state.get(target) == "open":
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target, [*path, target])
        state[room] = "done"

    for room in sorted(edges):
        if room not in state:
            walk(room, [room])
    return cycles
