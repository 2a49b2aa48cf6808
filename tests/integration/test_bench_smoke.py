"""The latency benchmarks run end to end on a small load: `bench/realtime.py` in both
shapes alerts on every failure trace it sent (it once sent nothing at all for a whole
stop, printing `nan` and exiting 0, when its senders' request shape changed under it),
and `bench/ingest.py --mix realistic-logs` stores every span of both variants. What the
benches measure is not asserted here (speed is measured in bench/, not in tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BENCH = Path(__file__).resolve().parents[2] / "bench"
STAGE_ROW = re.compile(
    r"^(rooted|remote-parent)\s+[\d,]+\s+[\d,]+\s+[\d.]+\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)",
    re.MULTILINE,
)


def run_bench(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_the_realtime_bench_alerts_on_every_failure_trace_in_both_shapes() -> None:
    out = run_bench("realtime.py", "--rates", "300", "--seconds", "3", "--warmup", "1",
                    "--mix", "realistic", "--shape", "both", "--senders", "2")  # fmt: skip
    rows = {m.group(1): m.groups()[1:] for m in STAGE_ROW.finditer(out)}
    assert set(rows) == {"rooted", "remote-parent"}, out
    for shape, (failures, alerted, p50, p99) in rows.items():
        assert int(failures) > 0 and alerted == failures, f"{shape}: {out}"
        assert 0 < float(p50) <= float(p99), f"{shape}: {out}"


def test_the_ingest_bench_stores_both_variants_of_the_logs_mix() -> None:
    out = run_bench("ingest.py", "--mix", "realistic-logs", "--spans", "3000", "--senders", "2")
    assert re.search(r"CPU per span log records / span attributes: \d+\.\d\d", out), out
    stored = re.search(r"^stored, spans/s\s+([\d,]+)\s+([\d,]+)$", out, re.MULTILINE)
    assert stored and all(int(v.replace(",", "")) > 0 for v in stored.groups()), out


SOAK_WINDOW = re.compile(
    r"^\s*[\d.]+ min  sent\s+([\d,]+)  stored\s+([\d,]+)  alerts\s+(\d+)  detection p50/p99/max"
    r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) s .*RSS MB: (.*)  swap (yes|no)$",
    re.MULTILINE,
)


def test_the_soak_bench_prints_every_window_and_stores_and_alerts_on_everything_it_sent() -> None:
    out = run_bench("soak.py", "--rate", "200", "--minutes", "0.5", "--window-s", "10",
                    "--warmup-minutes", "0.1", "--senders", "2")  # fmt: skip
    windows = SOAK_WINDOW.findall(out)
    assert len(windows) == 3, out
    for sent, _, _, p50, p99, worst, rss, _ in windows:
        assert int(sent.replace(",", "")) > 0 and 0 < float(p50) <= float(p99) <= float(worst)
        roles = dict(re.findall(r"([a-z]+(?: [a-z]+)?) (\d+)", rss))
        assert {"store owner", "collector", "realtime", "broker"} <= set(roles), rss
        assert all(int(mb) > 0 for mb in roles.values()), rss
    totals = re.search(
        r"sent ([\d,]+), stored ([\d,]+) \(distinct spans ([\d,]+), rows ([\d,]+)\); "
        r"failure traces (\d+), alerted (\d+)",
        out,
    )
    assert totals, out
    sent, stored, distinct, rows, failing, alerted = (
        int(v.replace(",", "")) for v in totals.groups()
    )
    assert sent == sum(int(w[0].replace(",", "")) for w in windows) and stored == sent, out
    assert distinct == sent and rows >= distinct, out  # each span in the store once
    assert failing > 0 and alerted == failing, out
    assert re.search(r"^  store owner under 1536 MB: (holds|does not hold)$", out, re.M), out
