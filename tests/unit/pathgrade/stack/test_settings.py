"""Settings of the stack's processes are checked in the parent before anything starts,
each problem named by the flag or the file field that set it."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

import pytest

from pathgrade.cli.support import (
    CliError,
    collector_args,
    collector_settings,
    export_args,
    export_settings,
)
from pathgrade.stack.embedded import Stack, _interrupt_after
from pathgrade.stack.options import StackOptions
from pathgrade.stack.settings import StackSettingsError, check_collector, check_policy


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    collector_args(parser)
    return parser.parse_args(argv)


def test_a_bad_flag_is_named_as_given_and_a_bad_file_field_by_the_file(tmp_path: Path) -> None:
    config = tmp_path / "collector.yaml"
    config.write_text("max_body_bytes: 0\nredaction: {capture_tool: [a]}\n")
    with pytest.raises(CliError) as refused:
        collector_settings(parsed("--http-port", "99999", "--config", str(config)))
    problems = str(refused.value).split("; ")
    assert problems == [
        "--http-port 99999: Input should be less than or equal to 65535",
        f"{config}: max_body_bytes: Input should be greater than 0",
        f"{config}: redaction.capture_tool: Extra inputs are not permitted",
    ]
    assert collector_settings(parsed("--http-port", "0")) == {"http_port": 0}


def test_an_unreadable_tokens_file_and_a_bad_policy_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StackSettingsError, match=r"^tokens_file: .*No such file"):
        check_collector({"tokens_file": str(tmp_path / "none.yaml")})
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("- not a mapping\n")
    with pytest.raises(StackSettingsError, match="expected a mapping of token -> tenant"):
        check_collector({"tokens_file": str(tokens)})
    policy = tmp_path / "policy.yaml"
    policy.write_text("tools: [\n")
    with pytest.raises(StackSettingsError, match=r"^policy: policy\.yaml: invalid YAML"):
        check_policy(str(policy))


def test_the_stack_refuses_bad_settings_before_it_takes_the_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    stack = Stack(StackOptions(data_dir=data_dir, collector={"grpc_port": -1}))
    with pytest.raises(StackSettingsError, match="grpc_port: Input should be greater"):
        stack.start()
    stack = Stack(StackOptions(data_dir=data_dir, realtime={"max_spans": 0}))
    with pytest.raises(StackSettingsError, match="realtime settings: max_spans"):
        stack.start()
    assert not data_dir.exists()  # no broker, store or process was started


def test_ctrl_c_during_the_settings_checks_comes_after_them_as_keyboard_interrupt() -> None:
    """pydantic wraps what is raised while it builds a model: Ctrl-C must not land there."""
    from pydantic import create_model

    built = []
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with pytest.raises(KeyboardInterrupt), _interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            built.append(create_model("Checked", severity=(str, "high"))())
        assert [model.severity for model in built] == ["high"]  # the block ran to its end
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_an_ignored_sigint_stays_ignored_during_the_settings_checks() -> None:
    """A background job starts with SIGINT ignored: the checks must not start catching it."""
    inherited = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, inherited)


def export_parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    export_args(parser)
    return parser.parse_args(argv)


def test_export_settings_come_from_the_flags_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20from-env")
    assert export_settings(export_parsed()) is None  # nothing asks for an export
    assert export_settings(export_parsed("--export-otlp", "http://c:4318")) == {
        "url": "http://c:4318",
        "headers": {"authorization": "Bearer from-env"},
    }
    config = tmp_path / "export.yaml"
    config.write_text("url: http://c:4318\nbatch_records: 0\n")
    argv = ["--export-otlp-config", str(config), "--export-otlp-header", "x-team=a=b",
            "--export-otlp-tenant", "t1", "--export-otlp-tenant", "t2"]  # fmt: skip
    with pytest.raises(CliError, match=rf"^{config}: batch_records: Input should be greater"):
        export_settings(export_parsed(*argv))
    config.write_text("url: http://c:4318\nbatch_records: 10\n")
    assert export_settings(export_parsed(*argv)) == {
        "url": "http://c:4318", "batch_records": 10, "headers": {"x-team": "a=b"},
        "tenants": ["t1", "t2"],
    }  # fmt: skip
    with pytest.raises(CliError, match=r"^--export-otlp: Value error, expected http"):
        export_settings(export_parsed("--export-otlp", "c:4318"))
    stack = Stack(StackOptions(data_dir=tmp_path / "store", export={"url": "udp://c"}))
    with pytest.raises(StackSettingsError, match="url: Value error"):
        stack.start()
    assert not (tmp_path / "store").exists()
