"""What a statement refers to, read from ClickHouse's own syntax tree of it.

ClickHouse parses the statement (`parseQueryToJSON`, the same parser that runs it) into a
JSON tree; `references` walks every node of it and lists what the statement reaches: the
tables it names (in FROM, JOIN, sub-queries, views' arguments, `x IN table`), the table
functions it calls, every other function it calls (`APPLY(f)` included), the names it
defines itself (CTEs and aliases), identifier parameters (`{name:Identifier}`, which name a
table only when the statement runs), whether it carries a SETTINGS clause, and any node of
a kind outside KNOWN_NODES (syntax this walk was not written for: refused, so new syntax
that could call a function some other way never runs unread). `read_policy` decides from
that whether a reader may run it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PARSE_TREE = "SELECT parseQueryToJSON({statement:String})"
"""ClickHouse's syntax tree of one statement, as JSON (no evaluation, no table read)."""
_IN_FUNCTION = re.compile(r"(global)?(not)?(null)?in(ignoreset)?", re.IGNORECASE)
"""The IN family (`in`, `notIn`, `globalNullIn`, ...): their right side may name a table."""

KNOWN_NODES = frozenset({
    "ArrayJoin", "Asterisk", "ColumnsApplyTransformer", "ColumnsExceptTransformer",
    "ColumnsListMatcher", "ColumnsRegexpMatcher", "ColumnsReplaceTransformer",
    "ColumnsReplaceTransformerReplacement", "ColumnsTransformerList", "ExplainQuery",
    "ExpressionList", "Function", "Identifier", "InterpolateElement", "Literal",
    "OrderByElement", "QualifiedAsterisk", "QualifiedColumnsListMatcher",
    "QualifiedColumnsRegexpMatcher", "QueryParameter", "SampleRatio", "SelectQuery",
    "SelectWithUnionQuery", "SetQuery", "ShowColumnsQuery", "ShowTablesQuery", "Subquery",
    "TableExpression", "TableIdentifier", "TableJoin", "TablesInSelectQuery",
    "TablesInSelectQueryElement", "WindowDefinition", "WindowListElement", "WithElement",
})  # fmt: skip
"""The node kinds whose every way to a table or a function this walk reads."""

TableName = tuple[str, ...]
"""A table's name as its parts: ("spans",) or ("system", "parts")."""


@dataclass
class References:
    """What one statement reaches (`references`)."""

    statement: str  # the tree's root type: SelectWithUnionQuery, ExplainQuery, ...
    tables: list[TableName] = field(default_factory=list)
    in_names: list[TableName] = field(default_factory=list)  # `x IN name`: a table, or an alias
    table_functions: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    defined_names: set[str] = field(default_factory=set)  # CTE names and aliases
    identifier_parameters: list[str] = field(default_factory=list)
    settings: bool = False  # a SETTINGS clause of a query (EXPLAIN's own options excluded)
    unknown_nodes: list[str] = field(default_factory=list)  # kinds outside KNOWN_NODES


def references(tree: dict[str, Any]) -> References:
    """Everything `tree` (a `parseQueryToJSON` document) reaches."""
    found = References(str(tree.get("type", "")))
    _visit(tree, found)
    return found


def _name_parts(identifier: dict[str, Any]) -> TableName:
    """An identifier's name as its parts (a quoted name with a dot stays one part)."""
    parts = identifier.get("name_parts")
    return tuple(parts) if parts else (str(identifier.get("name", "")),)


def _visit(node: Any, found: References) -> None:
    if isinstance(node, list):
        for item in node:
            _visit(item, found)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind is not None and kind not in KNOWN_NODES:
        found.unknown_nodes.append(str(kind))
    skipped: set[str] = set()
    if "alias" in node:
        found.defined_names.add(str(node["alias"]))
    if kind == "TableExpression" and "table_function" in node:
        function = node["table_function"]
        found.table_functions.append(str(function.get("name", "")))
        _visit(function.get("arguments"), found)
        skipped.add("table_function")
    elif kind == "TableIdentifier":
        found.tables.append(_name_parts(node))
    elif kind == "Function":
        name = str(node.get("name", ""))
        found.functions.append(name)
        arguments = (node.get("arguments") or {}).get("children") or []
        in_identifier = len(arguments) == 2 and arguments[1].get("type") == "Identifier"
        if in_identifier and _IN_FUNCTION.fullmatch(name):
            found.in_names.append(_name_parts(arguments[1]))
    elif kind == "ColumnsApplyTransformer" and "func_name" in node:  # SELECT * APPLY(f)
        found.functions.append(str(node["func_name"]))
    elif kind == "WithElement":
        found.defined_names.add(str(node.get("name", "")))
    elif kind == "QueryParameter" and node.get("param_type") == "Identifier":
        found.identifier_parameters.append(str(node.get("name", "")))
    if "settings" in node and kind != "ExplainQuery":
        found.settings = True
    for key, value in node.items():
        if key not in skipped:
            _visit(value, found)
