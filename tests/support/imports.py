"""A checker of a module -> imports graph against the house's import rules, which are data
in `pathgrade.cli.layout` (the one source; docs/layout.md's folder table is rendered from
it).

Every module belongs to a *room* (`layout.room_of`); `layout.allowed()` says which other
rooms a room may import; anything else is an arrow that points up or sideways, and a module
in no declared room is reported too. A circle between rooms is reported on its own, so a
rule table that allowed one by mistake would still be caught. `layout.libraries()` says
which libraries beyond the standard library a room may import (rooms not named there: any).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from pathgrade.cli.layout import PACKAGE_DIRS, allowed, libraries, room_of


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
    """Each module in no declared room, each import the rules do not allow, and each circle
    between rooms, as a sentence."""
    rules = allowed()
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    for module, imported in sorted(graph.items()):
        source = room_of(module)
        if source is None:
            continue
        if source not in rules:
            problems.append(f"{module} is in no room of pathgrade.cli.layout ({source})")
            continue
        for target_module in sorted(imported):
            target = room_of(target_module)
            if target is None or target == source or target_module not in graph:
                continue
            edges.setdefault(source, set()).add(target)
            if target not in rules[source]:
                problems.append(
                    f"{module} imports {target_module}: {source} may not import {target}"
                )
    problems.extend(f"circle between rooms: {' -> '.join(cycle)}" for cycle in _cycles(edges))
    return problems


def library_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Each import of a library its room's `libraries()` entry does not name, as a sentence."""
    rules = libraries()
    problems: list[str] = []
    for module, imported in sorted(graph.items()):
        room = room_of(module)
        if room not in rules:
            continue
        for name in sorted(imported):
            top = name.split(".")[0]
            if top in {"pathgrade", "__future__"} or top in sys.stdlib_module_names:
                continue
            if top not in rules[room]:
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
