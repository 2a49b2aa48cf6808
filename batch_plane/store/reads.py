"""Anyone's SQL, read-only: which statements a reader may run, and the reason to show
when one fails.

Free SQL (`pathgrade sql`, `pathgrade alerts`, the loopback endpoint's `/sql`) runs on a
session of its own that was made `readonly = 1` when it opened (`client.ClientStore`), so
ClickHouse itself refuses writes, DDL, `SET`, `SETTINGS` and table functions that reach
outside the store there. What `readonly = 1` still lets through is refused here, before
the statement runs: `USE` (it would move every later reader to another database),
`KILL QUERY` (it could cancel the store writer's insert), `SET param_*`, `INTO OUTFILE`
(chDB writes the file on the store owner's machine), `PARALLEL WITH` (another statement
beside the read), several statements at once, and a `FORMAT` clause (the client chooses
the format). ClickHouse parses the statement (`PARSE_SQL`); the check reads its canonical
form, and that canonical form is what runs.
"""

from __future__ import annotations

import itertools
import re

READ_STATEMENTS = ("SELECT", "WITH", "SHOW", "DESCRIBE", "EXPLAIN", "EXISTS")
PARSE_SQL = "SELECT formatQuerySingleLine({statement:String})"
"""ClickHouse's canonical one-line form of one statement (several are a syntax error)."""

_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`(?:[^`\\]|\\.)*`", re.DOTALL)
_TOKEN = re.compile(r"\w+|\(")
_PARSE_SCOPE = re.compile(
    r"(?:\. )?:? In scope SELECT formatQuerySingleLine\(.*\)(?=\. \(\w+\)$)", re.DOTALL
)


def refusal(canonical: str) -> str | None:
    """Why the statement (in ClickHouse's canonical form) may not run as a read; None
    when it may."""
    tokens = _TOKEN.findall(_QUOTED.sub(" ", canonical))  # keywords are upper case there
    if not tokens or tokens[0] not in READ_STATEMENTS:
        kind = tokens[0] if tokens else "an empty statement"
        return (
            f"only read statements run here ({', '.join(READ_STATEMENTS)}), not {kind}; "
            "writes go through pathgrade's own commands"
        )
    pairs = set(itertools.pairwise(tokens))
    if ("INTO", "OUTFILE") in pairs:
        return "INTO OUTFILE is not allowed: a read returns its rows, it writes no file"
    if ("PARALLEL", "WITH") in pairs:
        return "PARALLEL WITH is not allowed: run one statement at a time"
    if any(first == "FORMAT" and second != "(" for first, second in pairs):  # not format()
        return "a FORMAT clause is not allowed: the output format is chosen for you (--format)"
    return None


def clickhouse_reason(message: str) -> str:
    """ClickHouse's own words in a client error (from its `Code: N.` on), without the
    transport's preamble."""
    start = message.find("Code: ")
    return (message[start:] if start >= 0 else message).strip()


def parse_reason(message: str) -> str:
    """ClickHouse's reason for refusing to parse a statement, without the scope of the
    `PARSE_SQL` wrapper around it (which the user never wrote)."""
    return _PARSE_SCOPE.sub("", clickhouse_reason(message))
