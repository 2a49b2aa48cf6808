"""Settings documented once: every config model's fields are described, the README's and
docs' tables and the detector catalogue are what the models render, and flag help shows
the model's default."""

from __future__ import annotations

import argparse

import pytest
from pathgrade.batch_plane.scoring.online import OnlineScorerConfig
from pathgrade.batch_plane.store.writer import StoreWriterConfig
from pathgrade.collector.redact import RedactionConfig
from pathgrade.collector.service import CollectorConfig
from pathgrade.realtime_plane.config import RealtimeConfig, SamplerRates
from pydantic import BaseModel

from pathgrade.cli.reference import config_table, field_help, render_tables, rendered
from pathgrade.cli.support import collector_args
from pathgrade.stack.options import StackOptions
from tests.support.paths import REPO_ROOT

CONFIGS = [
    CollectorConfig,
    RedactionConfig,
    RealtimeConfig,
    SamplerRates,
    StoreWriterConfig,
    OnlineScorerConfig,
    StackOptions,
]


@pytest.mark.parametrize("model", CONFIGS, ids=lambda m: m.__name__)
def test_every_config_field_carries_a_description(model: type[BaseModel]) -> None:
    undescribed = [n for n, info in model.model_fields.items() if not info.description]
    assert undescribed == []


def test_generated_documentation_is_committed() -> None:
    stale = [
        path
        for path, text in rendered(REPO_ROOT).items()
        if (REPO_ROOT / path).read_text(encoding="utf-8") != text
    ]
    assert stale == [], "run `python -m pathgrade.cli.reference --write`"


def test_table_rows_carry_model_defaults_and_nested_keys() -> None:
    table = config_table(CollectorConfig)
    assert "| `grpc_port` | `4317` | OTLP/gRPC port (`0`: any free port) |" in table
    assert "| `redaction.capture_messages` | `false` |" in table
    assert "| `max_body_bytes` | `67108864` (64 MiB) |" in table
    assert "| `kafka_bootstrap` | required |" in table
    assert "bootstrap_servers" not in config_table(RealtimeConfig, ("bootstrap_servers",))


def test_render_tables_replaces_between_markers_and_names_a_missing_marker() -> None:
    text = "intro\n<!-- generated: t (x) -->\nold table\n<!-- end generated -->\nafter\n"
    out = render_tables(text, {"t": (SamplerRates, ())})
    assert "old table" not in out and "| `finding` | `1.0` |" in out
    assert out.startswith("intro\n") and out.endswith("<!-- end generated -->\nafter\n")
    with pytest.raises(ValueError, match="'other'"):
        render_tables(text, {"other": (SamplerRates, ())})


def test_flag_help_shows_the_model_default() -> None:
    parser = argparse.ArgumentParser()
    collector_args(parser)
    helps = {action.dest: action.help for action in parser._actions}
    assert helps["grpc_port"] == field_help(CollectorConfig, "grpc_port")
    assert helps["grpc_port"].endswith("(default 4317)")
    assert helps["capture_messages"].endswith("(default false)")
