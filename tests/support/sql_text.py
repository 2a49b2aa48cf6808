"""Where SQL text may live: the store room (`batch_plane/store/`) and the migrations, and a
finder of SQL statements in the string literals of a module's source.

A string literal (or an f-string, its fields read as placeholders) holds SQL when it starts,
after blanks and opening brackets, with a statement keyword (`SELECT`, `INSERT INTO`,
`ALTER TABLE`, ...) or with a clause only a statement has (`FROM`, `WHERE`, `GROUP BY`,
...), in upper case as the house writes SQL. Docstrings and other bare string statements
are prose and never count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pathgrade.cli.layout import PACKAGE_DIRS

SQL_START = re.compile(
    r"[\s(]*(?:SELECT|INSERT\s+INTO|ALTER\s+TABLE|CREATE|DROP|TRUNCATE|OPTIMIZE\s+TABLE|"
    r"DELETE\s+FROM|RENAME\s+TABLE|EXCHANGE|SYSTEM|WITH|FROM|WHERE|PREWHERE|GROUP\s+BY|"
    r"ORDER\s+BY|HAVING|UNION|(?:LEFT\s+|INNER\s+)?JOIN)\s"
)
"""A literal's start that makes it SQL (`AND`/`OR` alone do not: a condition alone is no
statement)."""

SQL_HOMES = ("batch_plane/store/",)
"""The store room (with the migrations' runner and the cluster layout's DDL); the migrations
themselves are `.sql` files (`schemas/migrations/`), never read here."""


def _skipped(tree: ast.AST) -> set[int]:
    """The ids of string constants read elsewhere or not at all: those standing alone as
    statements (docstrings) and the literal parts of f-strings (read with their f-string)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
    return skipped


def _text(node: ast.AST) -> str | None:
    """A string literal's text, an f-string's with `{}` for each field; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def sql_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal in `source` that is SQL."""
    tree = ast.parse(source)
    skipped = _skipped(tree)
    found = []
    for node in ast.walk(tree):
        text = None if id(node) in skipped else _text(node)
        if text is not None and SQL_START.match(text):
            found.append((node.lineno, text))
    return sorted(found)


def sql_holders(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Each source module outside the store room and the migrations that holds SQL (path
    from `root`), with its SQL literals."""
    holders = {}
    for folder in PACKAGE_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(SQL_HOMES):
                continue
            found = sql_literals(path.read_text())
            if found:
                holders[relative] = found
    return holders
