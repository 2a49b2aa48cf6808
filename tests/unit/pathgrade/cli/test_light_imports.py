"""The command line starts light: importing any settings module a flag reads imports no
Kafka client, gRPC, store engine, numpy, HTTP client or server, redactor or detector, and
building the parser none of these either, nor what only a handler or the docs generator
needs (checked in a fresh interpreter, where nothing was imported before)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from pathgrade.cli.main import build_parser
from pathgrade.cli.model_flags import MODEL_FIELD

HEAVY = (
    "kafka", "grpc", "chdb", "numpy", "httpx", "clickhouse_connect", "uvicorn",
    "pathgrade.detectors", "pathgrade.collector.redact",
)  # fmt: skip
"""What a definition module or the parser must not import (a package and its modules)."""
DEFINITION_MODULES = {
    "pathgrade.collector.config",
    "pathgrade.collector.limits",
    "pathgrade.collector.redaction_config",
    "pathgrade.batch_plane.scoring.online_config",
    "pathgrade.realtime_plane.config",
    "pathgrade.stack.options",
}
"""Settings modules the command line reaches, named here besides those its flags read."""
PARSER_ONLY = ("tqdm", "yaml", "pathgrade.cli.reference")
"""What only a handler or the docs generator needs, so building the parser must not import."""


PROBE = """
import json, sys
forbidden, steps, seen, found = json.loads(sys.argv[1]), json.loads(sys.argv[2]), set(), {}
for step in steps:
    exec(step, {})
    loaded = {f for f in forbidden for m in sys.modules if m == f or m.startswith(f + ".")}
    found[step], seen = sorted(loaded - seen), seen | loaded
print(json.dumps(found))
"""
"""Runs each step in turn in one fresh interpreter: what each step imported first."""


def first_imported(steps: list[str], forbidden: tuple[str, ...] = HEAVY) -> dict[str, list[str]]:
    """Step -> the `forbidden` packages (or modules) it was the first to import, in a fresh
    interpreter running `steps` in turn: none imports any of them when every list is empty,
    and a step that does is named (an earlier step may hide a later one's)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(forbidden), json.dumps(steps)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def flag_models() -> set[str]:
    """The modules of every model a `model_flag` of the parser reads."""
    modules: set[str] = set()
    parsers = [build_parser()]
    while parsers:
        for action in parsers.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += action.choices.values()
            elif hasattr(action, MODEL_FIELD):
                modules.add(getattr(action, MODEL_FIELD)[0].__module__)
    return modules


def test_the_settings_modules_import_definitions_only_and_the_parser_no_handlers_needs() -> None:
    modules = flag_models()
    assert {"pathgrade.collector.config", "pathgrade.realtime_plane.config"} <= modules
    steps = [f"import {module}" for module in sorted(modules | DEFINITION_MODULES)]
    steps.append("from pathgrade.cli.main import build_parser; build_parser()")
    heavy_step = "import pathgrade.collector.grouping"  # the producer's module: Kafka
    found = first_imported([*steps, heavy_step], HEAVY + PARSER_ONLY)
    caught = found.pop(heavy_step)
    assert {step: heavy for step, heavy in found.items() if heavy} == {}
    assert list(found) == steps  # every step ran
    assert caught == ["kafka"]  # and the probe sees what a step imports
