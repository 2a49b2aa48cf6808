"""What a reader session may reach: allow-lists of statements, tables, table functions and
functions, checked against what a statement refers to (`statement_tree.references`).

Every read (`pathgrade sql`, the loopback endpoint's `/sql`, `--where` filters, the browser
UI's queries) is checked before it runs:

- **Functions**: only those that compute from their arguments, known by the engine's own
  catalogue (`system.functions`): every function of a computing category (`PURE_CATEGORIES`:
  arithmetic, strings, dates, arrays, JSON, aggregates and their combinators, ...) and
  `PURE_OTHER_FUNCTIONS` of the catch-all "Other" category. So `file()` (reads a file of
  the store's host), `url`-like and dictionary functions (`dictGet`: dictionaries may read
  files, URLs or other tables), `joinGet`, `hasColumnInTable`, the server's settings,
  macros and host names, and any function ClickHouse adds later until it is listed here,
  are refused on every session, the owner's too.
- **Table functions**: only `TABLE_FUNCTIONS` (number and row generators, `values`, and
  `view`, whose query is checked like any other); never `file`, `url`, `s3`, `remote`,
  `mysql`, `postgresql`, `executable`, `input`, `merge` (it reads other tables past their
  row filters), or any other.
- **Tables**, on a tenant's session: the tenant tables (`tenancy.FILTERED_TABLES`, each
  filtered to the tenant's rows by `additional_table_filters`), `alerts_view` (a view over
  `alerts`, filtered inside), and the system tables of `SAFE_SYSTEM_TABLES`, which hold no
  data of any tenant; never another system table (`system.parts` counts every tenant's
  rows), a table without a tenant (the judge's cache), a materialized view or another
  database. A name the statement defines itself (a CTE, an alias) is accepted where no
  table of that name exists. The owner's session (no tenant) reads any table.
- **Statements**: a tenant's session runs queries (`SELECT`, `WITH`), `DESCRIBE` of what it
  may read and `EXISTS`; the owner's also `EXPLAIN` (of a query it may run) and `SHOW`.
  No session runs a SETTINGS clause or an identifier parameter (`{t:Identifier}` names a
  table only when the statement runs) on a tenant's session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pathgrade.batch_plane.store.statement_tree import References, TableName
from pathgrade.batch_plane.store.tenancy import FILTERED_TABLES

PURE_CATEGORIES = frozenset({
    "Aggregate Functions", "Arithmetic", "Arrays", "Bit", "Bitmap", "Comparison",
    "Conditional", "Dates and Times", "Distance", "Encoding", "Encryption", "Financial",
    "Geo", "Geo Polygon", "Hash", "IP Address", "JSON", "Logical", "Map", "Mathematical",
    "Null", "NumericIndexedVector", "QBit", "Random Number", "Rounding", "String",
    "String Replacement", "String Search", "String Splitting", "Time Series", "Time Window",
    "Tuple", "Type Conversion", "URL", "UUID",
})  # fmt: skip
"""`system.functions` categories whose functions compute from their arguments only."""
PURE_OTHER_FUNCTIONS = frozenset({
    "bar", "blockNumber", "blockSize", "byteSize", "countDigits", "currentDatabase",
    "defaultValueOfArgumentType", "defaultValueOfTypeName", "digits", "dumpColumnStructure",
    "finalizeAggregation", "formatReadableDecimalSize", "formatReadableQuantity",
    "formatReadableSize", "formatReadableTimeDelta", "getSetting", "getSettingOrDefault",
    "getSizeOfEnumType", "identity", "ignore", "indexHint", "initializeAggregation",
    "isConstant", "isDecimalOverflow", "materialize", "neighbor", "parseISO8601Duration",
    "parseReadableSize", "parseReadableSizeOrNull", "parseReadableSizeOrZero",
    "parseTimeDelta", "rowNumberInAllBlocks", "rowNumberInBlock", "runningAccumulate",
    "runningDifference", "runningDifferenceStartingWithFirstValue", "sleep", "sleepEachRow",
    "throwIf", "toColumnTypeName", "toTypeName", "transform", "variantElement",
    "variantType", "visibleWidth",
})  # fmt: skip
"""Functions of the catch-all "Other" category that compute from their arguments (or tell
the session's own settings and database)."""
SYNTAX_FUNCTIONS = frozenset({"lambda", "exists"})
"""Functions the parser writes for syntax (`x -> ...`, `EXISTS (subquery)`), which are not
in `system.functions`."""
TABLE_FUNCTIONS = frozenset({
    "numbers", "numbers_mt", "zeros", "zeros_mt", "generate_series", "generateSeries",
    "generateRandom", "values", "view",
})  # fmt: skip
"""Table functions any reader may call: they generate rows, or (`view`) run a query that
is checked like the statement around it."""
SAFE_SYSTEM_TABLES = frozenset({
    "one", "numbers", "numbers_mt", "zeros", "zeros_mt", "functions", "table_functions",
    "aggregate_function_combinators", "data_type_families", "time_zones", "formats",
    "collations",
})  # fmt: skip
"""The system tables a tenant's session may read: none holds rows or counts of a tenant."""
TENANT_READABLE = frozenset(FILTERED_TABLES) | {"alerts_view"}
"""The tables a tenant's session may read: each is filtered to its rows."""
TENANT_STATEMENTS = frozenset({"SelectWithUnionQuery"})
OWNER_STATEMENTS = TENANT_STATEMENTS | {"ExplainQuery", "ShowTablesQuery", "ShowColumnsQuery"}


@dataclass(frozen=True)
class CatalogueEntry:
    """One row of `system.functions`."""

    name: str
    aggregate: bool
    case_insensitive: bool
    alias_to: str
    category: str


class FunctionCatalogue:
    """Which functions a reader may call, from the engine's `system.functions` and
    `system.aggregate_function_combinators` (`CATALOGUE_SQL`, `COMBINATORS_SQL`)."""

    def __init__(self, entries: Iterable[CatalogueEntry], combinators: Iterable[str]) -> None:
        self.entries = {entry.name: entry for entry in entries}
        self.folded = {e.name.lower(): e for e in self.entries.values() if e.case_insensitive}
        self.combinators = sorted(combinators, key=len, reverse=True)

    def _entry(self, name: str) -> CatalogueEntry | None:
        entry = self.entries.get(name) or self.folded.get(name.lower())
        if entry is not None and entry.alias_to:
            return self.entries.get(entry.alias_to) or entry
        return entry

    def allows(self, name: str) -> bool:
        """Whether `name` computes from its arguments only (an aggregate with combinators,
        `sumIf`, `uniqExactStateIf`, as its aggregate)."""
        if name in SYNTAX_FUNCTIONS:
            return True
        entry = self._entry(name)
        if entry is not None:
            return entry.category in PURE_CATEGORIES or entry.name in PURE_OTHER_FUNCTIONS
        for combinator in self.combinators:
            if name.endswith(combinator) and len(name) > len(combinator):
                base = self._entry(name[: -len(combinator)])
                if base is not None and base.aggregate:
                    return self.allows(base.name)
                if base is None and self.allows(name[: -len(combinator)]):
                    return True  # several combinators: sumArrayIf
        return False


CATALOGUE_SQL = (
    "SELECT name, is_aggregate, case_insensitive, alias_to, categories FROM system.functions"
)
COMBINATORS_SQL = "SELECT name FROM system.aggregate_function_combinators"


@dataclass(frozen=True)
class ReadScope:
    """Who reads: a tenant (only its rows) or the owner (None), in `database`."""

    tenant: str | None
    database: str


def policy_refusal(
    found: References,
    scope: ReadScope,
    catalogue: FunctionCatalogue,
    existing_tables: Callable[[], frozenset[str]],
) -> str | None:
    """Why a statement that reaches `found` may not run in `scope`; None when it may.
    `existing_tables()` names the tables of the current database (asked only when the
    statement names something it defines itself)."""
    tenant = scope.tenant is not None
    allowed = TENANT_STATEMENTS if tenant else OWNER_STATEMENTS
    if found.statement not in allowed:
        return f"{_statement_name(found.statement)} is not a read this session runs" + (
            " (a tenant's session runs SELECT, WITH, DESCRIBE and EXISTS)" if tenant else ""
        )
    if found.unknown_nodes:
        return (
            f"the statement uses {found.unknown_nodes[0]}, which reads do not run (the check "
            "reads every way a statement reaches a table or a function, for known syntax)"
        )
    if found.settings:
        return "a SETTINGS clause is not allowed: the session's settings are fixed"
    for name in found.table_functions:
        if name not in TABLE_FUNCTIONS:
            return (
                f"table function {name}() is not allowed: reads reach only the store's own "
                f"tables (allowed: {', '.join(sorted(TABLE_FUNCTIONS))})"
            )
    for name in found.functions:
        if not catalogue.allows(name):
            return (
                f"function {name}() is not allowed: reads run functions that compute from "
                "their arguments, never ones that reach files, URLs, dictionaries, other "
                "tables or the server (docs/stack.md)"
            )
    if not tenant:
        return None
    if found.identifier_parameters:
        name = found.identifier_parameters[0]
        return f"identifier parameter {{{name}:Identifier}} is not allowed on a tenant's session"
    return _table_refusal(found, scope, existing_tables)


def _table_refusal(
    found: References, scope: ReadScope, existing_tables: Callable[[], frozenset[str]]
) -> str | None:
    """Why a tenant's statement may not read one of the tables it names."""
    own = [(name, name[0]) for name in [*found.tables, *found.in_names]
           if len(name) == 1 and name[0] in found.defined_names]  # fmt: skip
    if own:
        clash = {n for _, n in own} & existing_tables()
        if clash:
            return (
                f"{sorted(clash)[0]!r} is both a name the statement defines and a table: "
                "name the CTE or alias otherwise"
            )
    defined = {name for name, _ in own}
    for name in [*found.tables, *found.in_names]:
        if name not in defined and not _tenant_may_read(name, scope.database):
            listed = sorted(t for t in TENANT_READABLE if not t.endswith("_local"))
            return (
                f"table {'.'.join(name)} is not readable on a tenant's session (its tables: "
                f"{', '.join(listed)}, and system.{{{', '.join(sorted(SAFE_SYSTEM_TABLES))}}})"
            )
    return None


def _tenant_may_read(name: TableName, database: str) -> bool:
    if len(name) == 1:
        return name[0] in TENANT_READABLE
    if len(name) == 2 and name[0] == "system":
        return name[1] in SAFE_SYSTEM_TABLES
    return len(name) == 2 and name[0] == database and name[1] in TENANT_READABLE


def _statement_name(tree_type: str) -> str:
    """A statement kind as a user writes it: ShowTablesQuery -> SHOW."""
    for prefix, words in (("Show", "SHOW"), ("Explain", "EXPLAIN"), ("Describe", "DESCRIBE")):
        if tree_type.startswith(prefix):
            return words
    return tree_type or "an empty statement"
