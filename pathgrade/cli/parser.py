"""The `pathgrade` argument parser: errors that name the command they come from.

A command given without its sub-command (bare `pathgrade`, `pathgrade dataset`) prints
that command's full help; an unknown option is named, with the command's usage and the
closest option it has (`pathgrade up: unknown option --demoo (did you mean --demo?)`).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import Any

_PARSER = "_pathgrade_parser"
"""Namespace attribute: the innermost (sub)command parser that parsed the command line."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose sub-command parsers are CommandParsers too (argparse makes
    them of the parent's class)."""

    def add_subparsers(self, **kwargs: Any) -> Any:
        """Sub-commands are not required at parse time: `parse_args` prints the full help
        of a command given without one, instead of argparse's one-line error."""
        kwargs["required"] = False
        return super().add_subparsers(**kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _PARSER):  # the innermost parser returns first
            setattr(parsed, _PARSER, self)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """The parsed command line; exits 2 with the innermost command's help when its
        sub-command is missing, or naming what it does not know."""
        parsed, extras = self.parse_known_args(args, namespace)
        command: CommandParser = getattr(parsed, _PARSER)
        delattr(parsed, _PARSER)
        if extras:
            command.error(unknown_arguments(command, extras))
        if not hasattr(parsed, "run"):
            command.print_help(sys.stderr)
            command.exit(2)
        return parsed


def unknown_arguments(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """What `parser` did not recognise: the first unknown option (with the closest known
    one), else the unexpected arguments."""
    options = [s for action in parser._actions for s in action.option_strings]
    for extra in extras:
        if extra.startswith("-") and len(extra) > 1:
            name = extra.split("=", 1)[0]
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.7)
            hint = f" (did you mean {close[0]}?)" if close else f" (see {parser.prog} --help)"
            return f"unknown option {name}{hint}"
    return f"unexpected argument{'s' if len(extras) > 1 else ''}: {' '.join(extras)}"
