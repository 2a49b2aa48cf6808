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


MEMORY_ROW = re.compile(r"^  (store owner|collector|realtime|broker): .*?((?:\s+[\d-]+){6})$", re.M)


def test_the_memory_bench_reads_every_process_of_the_stack_idle_and_through_the_burst() -> None:
    out = run_bench("memory.py", "--spans", "600", "--settle", "1")
    rows: dict[str, list[int]] = {}
    for match in MEMORY_ROW.finditer(out):
        values = match.group(2).split()  # PSS is "-" where /proc does not show it
        rows[match.group(1)] = [int(values[0]), int(values[2]), int(values[3])]
    assert set(rows) == {"store owner", "collector", "realtime", "broker"}, out
    for role, (idle_rss, idle_anon, peak_rss) in rows.items():
        assert 0 < idle_anon <= idle_rss and peak_rss > 0, f"{role}: {out}"


def test_the_reads_bench_times_every_request_at_each_size_and_keeps_a_tenant_to_its_rows() -> None:
    out = run_bench("reads.py", "scale", "--sizes", "3000,6000", "--seed-spans", "1500",
                    "--repeats", "2", "--cold", "1")  # fmt: skip
    sys.path.insert(0, str(BENCH))
    from reads import REQUESTS  # the bench's own list of requests

    for size in ("3,000", "6,000"):
        table = out.split(f"== {size} spans")[1].split("\n\n")[0]
        for request in REQUESTS:
            row = re.search(rf"^{re.escape(request.name)}\s+([\d.]+)\s+([\d.]+)", table, re.M)
            assert row and 0 < float(row[1]) <= float(row[2]), f"{request.name} at {size}: {out}"
    grown = re.search(r"^6,000: grown to ([\d,]+) spans", out, re.MULTILINE)
    assert grown and int(grown[1].replace(",", "")) >= 6000, out
    shares = re.findall(r"(traces: first page, 24h|traces: tool): ([\d.]+)", out)
    assert len(shares) == 4 and all(float(ratio) <= 1 for _, ratio in shares), out


def test_the_reads_bench_keeps_its_cpu_mode() -> None:
    out = run_bench("reads.py", "cpu", "--queries", "5", "--rounds", "1")
    ratios = re.findall(r"CPU per query, ([\d.]+)x the writer's", out)
    assert len(ratios) == 2 and all(float(r) > 0 for r in ratios), out
