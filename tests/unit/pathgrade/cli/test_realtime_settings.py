"""The realtime plane's settings file (`pathgrade realtime --config`, `pathgrade up
--realtime-config`): merged under the flags, validated before anything starts, every key
documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pathgrade.realtime_plane.config import RealtimeConfig

from pathgrade.cli.support import CliError, realtime_settings
from pathgrade.stack.embedded import Stack
from pathgrade.stack.options import StackOptions
from tests.support.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs" / "realtime.md"


def test_the_file_sets_bounds_and_rates_and_the_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "realtime.yaml"
    path.write_text(
        "max_traces: 2000\nmax_spans: 40000\nquiet_window_s: 2.5\n"
        "sampler:\n  tiers: {high: 1.0}\n  tool_error: 0.0\nwebhook_url: http://a/hook\n"
    )
    settings = realtime_settings(path, webhook_url="http://b/hook", policy_path=None)
    config = RealtimeConfig(bootstrap_servers="k:9092", **settings)
    assert (config.max_traces, config.max_spans, config.quiet_window_s) == (2000, 40000, 2.5)
    assert config.sampler.tiers == {"high": 1.0} and config.sampler.tool_error == 0.0
    assert config.webhook_url == "http://b/hook" and config.policy_path is None
    assert realtime_settings(None, quiet_window_s=None) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_tracez: 5\n", "max_tracez: Extra inputs are not permitted"),
        ("max_spans: -1\n", "max_spans: Input should be greater than 0"),
        ("sampler: {finding: 2}\n", "sampler.finding: Input should be less than or equal to 1"),
        ("fetch_max_wait_ms: 0\n", "fetch_max_wait_ms: Input should be greater than 0"),
        (
            "idle_fetch_wait_ms: 0\n",
            "idle_fetch_wait_ms: Input should be greater than or equal to 1",
        ),
        (
            "idle_fetch_wait_ms: 10001\n",
            "idle_fetch_wait_ms: Input should be less than or equal to 10000",
        ),
        ("bootstrap_servers: k:1\n", "bootstrap_servers: set the broker with --kafka"),
        ("- a list\n", "expected a mapping of realtime settings"),
        ("max_traces: [\n", "while parsing"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "realtime.yaml"
    path.write_text(text)
    with pytest.raises(CliError, match=re.escape(message)) as refused:
        realtime_settings(path)
    assert str(refused.value).startswith(str(path))


def test_every_setting_is_documented() -> None:
    documented = set(re.findall(r"^\| `(\w+)` \|", DOCS.read_text(), re.M))
    assert set(RealtimeConfig.model_fields) - {"bootstrap_servers"} <= documented


def test_pathgrade_up_hands_the_file_to_its_realtime_processes(tmp_path: Path) -> None:
    path = tmp_path / "realtime.yaml"
    path.write_text("max_traces: 123\nturns_topic: elsewhere\npolicy_path: file.yaml\n")
    settings = realtime_settings(path, policy_path="flag.yaml", webhook_url=None)
    for workers, turns in ((1, None), (2, "pathgrade.turns")):
        options = StackOptions(
            data_dir=tmp_path, realtime=settings, realtime_workers=workers,
            policy=settings.get("policy_path"), alert_webhook=settings.get("webhook_url"),
        )  # fmt: skip
        stack = Stack(options)
        stack.bootstrap = "k:9092"
        config = stack.realtime_config()
        assert (config.max_traces, config.policy_path, config.bootstrap_servers) == (
            123,
            "flag.yaml",
            "k:9092",
        )
        assert config.turns_topic == turns  # the stack decides, by its process count


def test_the_commands_refuse_a_bad_file_before_starting(tmp_path: Path) -> None:
    path = tmp_path / "realtime.yaml"
    path.write_text("max_traces: 0\n")
    for argv in (
        ["up", "--data-dir", str(tmp_path / "d"), "--realtime-config", str(path)],
        ["realtime", "--kafka", "127.0.0.1:9", "--config", str(path)],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *argv], capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "max_traces: Input should be greater than 0" in done.stderr
