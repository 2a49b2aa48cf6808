"""Limits must be positive and an empty result still reads as a table."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pathgrade.schemas.store import QueryResult

from pathgrade.cli.main import build_parser
from pathgrade.cli.output import format_table


@pytest.mark.parametrize(
    "argv",
    [
        ["alerts", "--limit", "0"],
        ["gates", "list", "--limit", "-1"],
        ["dataset", "from-traces", "n", "--where", "1", "--limit", "0"],
        ["replay", "--where", "1", "--limit", "ten"],
    ],
)
def test_a_limit_below_one_is_refused_naming_the_flag(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "--limit: expected a positive integer" in capsys.readouterr().err


def test_a_positive_limit_is_taken() -> None:
    assert build_parser().parse_args(["gates", "list", "--limit", "3"]).limit == 3


def test_tables_align_and_an_empty_result_without_columns_says_so() -> None:
    result = QueryResult(["Code", "n"], ["String", "UInt64"], [["PG110", 12], ["PG1", 3]])
    assert format_table(result).splitlines() == [
        "Code   n ",
        "-----  --",
        "PG110  12",
        "PG1    3 ",
        "(2 rows)",
    ]
    assert format_table(QueryResult([], [], [])) == "(0 rows)"
    assert format_table(QueryResult(["Code"], ["String"], [])).splitlines() == [
        "Code",
        "----",
        "(0 rows)",
    ]


def test_the_ui_box_without_a_tokens_file_serves_loopback_only() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "ui", "--clickhouse", "chdb:///nowhere",
         "--listen", "0.0.0.0:8080"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "without --tokens-file the UI shows every tenant, so it serves loopback only" in (
        refused.stderr
    )
