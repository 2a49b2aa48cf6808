"""Bare `pathgrade` prints its full help; errors name the command and the unknown option."""

from __future__ import annotations

import pytest

from pathgrade.cli.main import COMMAND_MODULES, build_parser, main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0), capsys.readouterr().err


def test_bare_pathgrade_prints_the_full_help_listing_every_command(capsys) -> None:
    code, err = run([], capsys)
    assert code == 2
    commands = [name for name in build_parser()._subparsers._group_actions[0].choices]
    assert len(commands) >= len(COMMAND_MODULES)
    for name in commands:
        assert f"\n    {name} " in err or f"\n    {name}\n" in err, name
    assert "pathgrade up --demo" in err and "required" not in err


def test_a_command_without_its_sub_command_prints_that_commands_help(capsys) -> None:
    code, err = run(["dataset"], capsys)
    assert code == 2
    assert err.startswith("usage: pathgrade dataset")
    assert "from-traces" in err and "positional arguments" in err


def test_an_unknown_option_is_named_with_its_commands_usage_and_the_closest_option(
    capsys,
) -> None:
    code, err = run(["up", "--demoo"], capsys)
    assert code == 2
    assert err.startswith("usage: pathgrade up ")
    assert err.rstrip().endswith(
        "pathgrade up: error: unknown option --demoo (did you mean --demo?)"
    )
    code, err = run(["alerts", "--limit", "3", "--colour=red"], capsys)
    assert "pathgrade alerts: error: unknown option --colour (see pathgrade alerts --help)" in err
    code, err = run(["dataset", "show", "x", "--itemz", "2"], capsys)
    assert "pathgrade dataset show: error: unknown option --itemz (did you mean --items?)" in err


def test_an_unexpected_positional_is_named(capsys) -> None:
    code, err = run(["sql", "SELECT 1", "extra"], capsys)
    assert code == 2 and "pathgrade sql: error: unexpected argument: extra" in err


def test_a_complete_command_line_parses_without_the_internal_marker() -> None:
    args = build_parser().parse_args(["alerts", "--limit", "3"])
    assert args.limit == 3 and callable(args.run)
    assert not [name for name in vars(args) if name.startswith("_pathgrade")]
