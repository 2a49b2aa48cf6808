"""The rules of bench/mutation.py that need no cosmic-ray: which mutants run, which tests
run on each, and the mutated module's stale bytecode removed. Pure functions of the source,
the coverage and the copy's files, so the suite tests them with its `[test]` extra alone
(tests/unit/bench/test_mutation_rules.py)."""

from __future__ import annotations

import ast
from pathlib import Path

MIRRORED = {
    ("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("FloorDiv", "Div"),
    ("Div", "FloorDiv"), ("Mod", "FloorDiv"), ("Pow", "Mul"), ("LShift", "RShift"),
    ("RShift", "LShift"), ("BitOr", "BitAnd"), ("BitAnd", "BitOr"), ("BitXor", "BitAnd"),
}  # fmt: skip
UNARY_KEPT = {"Delete_Not", "Delete_USub", "USub_UAdd", "UAdd_USub"}
# Decorators whose function body runs once per process (or object) and is then served from
# the cache: coverage gives its lines to the first test that ran it only.
CACHING = {"cache", "lru_cache", "cached_property"}

Position = tuple[int, int]  # (line, column), as cosmic-ray's MutationSpec.start_pos
Span = tuple[Position, Position]
Function = ast.FunctionDef | ast.AsyncFunctionDef


def kept_operator(name: str) -> bool:
    """Whether mutants of cosmic-ray operator `name` are run (see bench/mutation.py's doc)."""
    kind, _, pair = name.removeprefix("core/").partition("_")
    if kind == "ReplaceBinaryOperator":
        return tuple(pair.split("_")) in MIRRORED
    if kind == "ReplaceComparisonOperator":
        source, target = pair.split("_")
        return target not in ("Is", "IsNot") or source in ("Is", "IsNot")
    if kind == "ReplaceUnaryOperator":
        return pair in UNARY_KEPT
    return True


def annotation_spans(source: str) -> list[Span]:
    """(start, end) positions, (line, column), of every annotation in `source`."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotation = node.annotation
        elif isinstance(node, Function):
            annotation = node.returns
        else:
            continue
        if annotation is not None and annotation.end_lineno is not None:
            start = (annotation.lineno, annotation.col_offset)
            spans.append((start, (annotation.end_lineno, annotation.end_col_offset or 0)))
    return spans


def in_annotation(start: Position, end: Position, spans: list[Span]) -> bool:
    """Whether the mutant from `start` to `end` lies inside one of the annotation `spans`."""
    return any(first <= start and end <= last for first, last in spans)


def keyword_only_marker(start: Position, lines: list[str]) -> bool:
    """Whether the mutant at `start` turns a signature's bare `*` (cosmic-ray takes it for a
    product) into `/`: keyword-only parameters become positional-or-keyword, which no call
    notices."""
    row, column = start
    text = lines[row - 1][column:]
    return text.startswith("*") and text[1:].lstrip().startswith((",", ")"))


def statement_starts(source: str) -> dict[int, int]:
    """Each line of `source` -> the first line of the innermost statement holding it (the
    line coverage records for a statement spread over several lines, such as a signature)."""
    starts: dict[int, int] = {}
    for node in ast.walk(ast.parse(source)):  # outer statements first, inner ones overwrite
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            for line in range(node.lineno, node.end_lineno + 1):
                starts[line] = node.lineno
    return starts


def _caching(decorator: ast.expr) -> bool:
    """`@cache`, `@functools.lru_cache(maxsize=8)`, `@cached_property`, ..."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in CACHING


def _lines(function: Function) -> set[int]:
    return set(range(function.lineno, (function.end_lineno or function.lineno) + 1))


def cached_lines(source: str) -> set[int]:
    """The lines of `source` that run once and are then served from a cache: the functions
    decorated with one of CACHING, and the module's functions named nowhere else than in
    those (called only from them). Coverage gives such a line to the first test that ran
    it, not to every test whose result depends on it."""
    tree = ast.parse(source)
    cached = [
        n
        for n in ast.walk(tree)
        if isinstance(n, Function) and any(map(_caching, n.decorator_list))
    ]
    lines = set().union(*map(_lines, cached))
    top_level = {n.name: n for n in tree.body if isinstance(n, Function) and n not in cached}
    named_at: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in top_level:
            named_at.setdefault(node.id, []).append(node.lineno)
    grown = True
    while grown:  # a helper of a helper of a cached function, ...
        reached = [name for name, where in named_at.items() if all(line in lines for line in where)]
        grown = bool(reached)
        for name in reached:
            lines |= _lines(top_level[name])
            del named_at[name]
    return lines


def selected_tests(
    lines: range,
    covering: dict[int, set[str]],
    starts: dict[int, int],
    cached: set[int],
    tests: list[str],
) -> list[str]:
    """The tests to run on a mutant of `lines`: those covering them (or their statement's
    first line); all of `tests` when a line runs at import (its mutant changes what every
    test imports) or is one of the `cached` lines some test runs (every test after the
    first that ran it reads what it computed)."""
    ids: set[str] = set()
    for line in lines:
        ids |= covering.get(line) or covering.get(starts.get(line, line), set())
    if "" in ids or (ids and not cached.isdisjoint(lines)):
        return list(tests)
    return sorted(ids)


def drop_bytecode(module: Path) -> None:
    """Remove the bytecode caches of `module` in the copy. The suite writes them whatever
    PYTHONDONTWRITEBYTECODE says (tests/conftest.py), and Python takes a cache as current
    when the source's size and whole second of modification match: a mutant written in the
    second of the one before, and as long, ran as that one (its verdict and output)."""
    for cached in (module.parent / "__pycache__").glob(f"{module.stem}.*.pyc"):
        cached.unlink(missing_ok=True)
