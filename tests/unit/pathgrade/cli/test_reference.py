"""Settings documented once: every config model's fields are described, the docs' tables
and the detector catalogue are what the models render, and flag help shows
the model's default."""

from __future__ import annotations

import argparse
import inspect
from typing import get_args

import pytest
from pathgrade.batch_plane.edge.simulation_config import SimulationConfig
from pathgrade.batch_plane.export.config import ExportConfig
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.collector.config import CollectorConfig
from pathgrade.collector.redact import RedactionConfig
from pathgrade.detectors.conventions import (
    Conventions,
    IdempotencyConfig,
    IdentityConfig,
    ToolEffects,
)
from pathgrade.detectors.policy import SectionBase
from pathgrade.realtime_plane.config import RealtimeConfig, SamplerRates
from pathgrade.schemas.genai_versions import VERSIONS
from pydantic import BaseModel, ValidationError

from pathgrade.cli.main import build_parser
from pathgrade.cli.model_flags import MODEL_FIELD, field_help
from pathgrade.cli.reference import config_table, render_tables, rendered, versions_table
from pathgrade.cli.support import collector_args, validation_reason
from pathgrade.demo.options import DemoOptions, Flavor
from pathgrade.demo.sender import run_demo
from pathgrade.demo.writers import WRITERS
from pathgrade.stack.alert_lines import AlertLineSettings
from pathgrade.stack.options import StackOptions
from pathgrade.web.options import UiOptions
from pathgrade.web.rendering import UiSettings
from tests.support.paths import REPO_ROOT

CONFIGS = [
    CollectorConfig,
    RedactionConfig,
    RealtimeConfig,
    SamplerRates,
    StoreWriterConfig,
    OnlineScorerConfig,
    StackOptions,
    ExportConfig,
    SimulationConfig,
    JudgeEndpoint,
    AlertLineSettings,
    UiSettings,
    UiOptions,
    DemoOptions,
    Conventions,
    ToolEffects,
    IdentityConfig,
    IdempotencyConfig,
    SectionBase,
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


TIED_FLAGS = {
    ("up", "--grpc-port"): (CollectorConfig, "grpc_port"),
    ("up", "--capture-tools"): (RedactionConfig, "capture_tools"),
    ("up", "--allow-keys"): (RedactionConfig, "allowed_keys"),
    ("up", "--kafka"): (StackOptions, "kafka"),
    ("up", "--demo"): (StackOptions, "demo"),
    ("up", "--broker-max-mb"): (StackOptions, "broker_max_mb"),
    ("up", "--store-writer-nice"): (StackOptions, "store_writer_niceness"),
    ("up", "--store-memory-mb"): (StackOptions, "store_memory_mb"),
    ("up", "--store-cache-mb"): (StackOptions, "store_cache_mb"),
    ("up", "--realtime-workers"): (StackOptions, "realtime_workers"),
    ("up", "--status-every"): (StackOptions, "status_every_s"),
    ("up", "--log-format"): (AlertLineSettings, "log_format"),
    ("collector", "--http-port"): (CollectorConfig, "http_port"),
    ("collector", "--kafka"): (CollectorConfig, "kafka_bootstrap"),
    ("store-writer", "--kafka"): (StoreWriterConfig, "bootstrap_servers"),
    ("realtime", "--kafka"): (RealtimeConfig, "bootstrap_servers"),
    ("scorer", "--kafka"): (OnlineScorerConfig, "bootstrap_servers"),
    ("collector", "--capture-messages"): (RedactionConfig, "capture_messages"),
    ("realtime", "--policy"): (RealtimeConfig, "policy_path"),
    ("realtime", "--alert-webhook"): (RealtimeConfig, "webhook_url"),
    ("realtime", "--quiet-window"): (RealtimeConfig, "quiet_window_s"),
    ("realtime", "--log-format"): (AlertLineSettings, "log_format"),
    ("realtime", "--ui-url"): (AlertLineSettings, "trace_url_base"),
    ("scorer", "--policy"): (OnlineScorerConfig, "policy"),
    ("scorer", "--judge-url"): (JudgeEndpoint, "base_url"),
    ("score", "--judge-model"): (JudgeEndpoint, "model"),
    ("score", "--api-key-env"): (JudgeEndpoint, "api_key_env"),
    ("judge calibrate", "--concurrency"): (JudgeEndpoint, "concurrency"),
    ("ui", "--listen"): (UiOptions, "listen"),
    ("ui", "--tokens-file"): (UiOptions, "tokens_file"),
    ("ui", "--metrics"): (UiOptions, "metrics"),
    ("edge run", "--run-id"): (SimulationConfig, "run_id"),
    ("edge run", "--seed"): (SimulationConfig, "seed"),
    ("edge run", "--replays"): (SimulationConfig, "replays"),
    ("edge run", "--variants"): (SimulationConfig, "variants"),
    ("edge run", "--max-restarts"): (SimulationConfig, "max_restarts"),
    ("edge run", "--suite-version"): (SimulationConfig, "suite_version"),
    ("demo", "--traces"): (DemoOptions, "traces"),
    ("demo", "--seed"): (DemoOptions, "seed"),
    ("demo", "--flavor"): (DemoOptions, "flavor"),
    ("up", "--export-otlp"): (ExportConfig, "url"),
    ("up", "--export-otlp-tenant"): (ExportConfig, "tenants"),
    ("exporter", "--export-otlp"): (ExportConfig, "url"),
    ("exporter", "--export-otlp-tenant"): (ExportConfig, "tenants"),
}
"""(command, flag) -> the config field it sets: each must take help and default from it."""


def flag_actions(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, str], argparse.Action]:
    """(command, flag) -> its action, for every command of `pathgrade`."""
    found: dict[tuple[str, str], argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= flag_actions(sub, (*path, name))
        for flag in action.option_strings:
            found[(" ".join(path), flag)] = action
    return found


def test_every_flag_of_a_config_field_takes_its_help_and_default_from_the_model() -> None:
    actions = flag_actions(build_parser())
    tied = {key: getattr(a, MODEL_FIELD) for key, a in actions.items() if hasattr(a, MODEL_FIELD)}
    assert {key: tied.get(key) for key in TIED_FLAGS} == TIED_FLAGS
    for key, (model, name) in tied.items():
        action, info = actions[key], model.model_fields[name]
        shown = action.help.replace("%%", "%")
        assert info.description and info.description in shown, key
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        if default is None:
            assert action.default is None, key
            continue
        assert action.default in (None, default), key  # None: a settings file may set it
        assert shown.endswith(")") and " (default " in shown, key


def test_flag_defaults_are_the_models_as_written() -> None:
    actions = flag_actions(build_parser())
    assert actions[("edge run", "--replays")].default == 3
    assert actions[("edge run", "--replays")].help.endswith("(default 3)")
    assert actions[("realtime", "--quiet-window")].default is None  # the --config file's or 1.0
    assert actions[("realtime", "--quiet-window")].help.endswith("(default 1.0)")
    assert actions[("ui", "--listen")].default == "127.0.0.1:8080"
    assert actions[("up", "--log-format")].default == StackOptions(data_dir=".").log_format
    assert actions[("score", "--concurrency")].default == JudgeEndpoint("u", "m").concurrency


def test_a_models_error_reads_as_its_validator_wrote_it() -> None:
    with pytest.raises(ValidationError) as raised:
        SimulationConfig(run_id="r", replays=0)
    assert validation_reason(raised.value) == "replays: must be at least 1, got 0"
    with pytest.raises(ValidationError) as raised:
        SimulationConfig(run_id="r", seed="x")  # type: ignore[arg-type]
    assert validation_reason(raised.value).startswith("seed: Input should be a valid integer")


def test_the_demos_flavors_and_defaults_are_its_writers_and_run_demos() -> None:
    assert set(get_args(Flavor)) == set(WRITERS)
    defaults = inspect.signature(run_demo).parameters
    from_function = {name: defaults[name].default for name in DemoOptions.model_fields}
    assert from_function == DemoOptions().model_dump()


def test_the_table_in_the_docs_is_generated_from_the_versions() -> None:
    table = versions_table()
    docs = (REPO_ROOT / "docs" / "collector.md").read_text()
    assert table in docs
    for version in VERSIONS:
        for change in version.changes:
            assert f"| {version.version} | {change.kind} |" in table
            assert (change.old or change.new) in table
