"""The store-side and memory benches run end to end on a small load: `bench/memory.py`
reads every process of the stack idle and through a burst, `bench/reads.py` times every
request at each size (a tenant's viewer reading no more than the operator) and keeps its CPU
mode. What the benches measure is not asserted here (speed is measured in bench/, not in
tests). Apart from tests/integration/test_bench_smoke.py so the two spread over workers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.integration.test_bench_smoke import BENCH, run_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

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


def test_the_reads_bench_against_another_checkout_reads_the_same_store_on_both_sides(
    tmp_path: Path,
) -> None:
    """`scale --against PYTHON` (here this checkout's own python: the same reads on both
    sides) serves each side its own copy of a kept store and prints both sides' figures."""
    store = tmp_path / "store"
    run_bench("reads.py", "scale", "--sizes", "3000", "--seed-spans", "1500", "--repeats", "1",
              "--cold", "0", "--only", "traces: tool", "--data-dir", str(store))  # fmt: skip
    out = run_bench("reads.py", "scale", "--data-dir", str(store), "--against", sys.executable,
                    "--repeats", "2", "--cold", "1", "--only", "traces: tool")  # fmt: skip
    sides = re.search(r"^this: .*?, ([\d,]+) spans; against: .*?, ([\d,]+) spans$", out, re.M)
    assert sides and sides[1] == sides[2] and int(sides[1].replace(",", "")) >= 3000, out
    rows = re.findall(r"^(traces: tool(?: \(tenant\))?)\s.*\|\s+[\d.]+\s+([\d.]+)$", out, re.M)
    assert rows == [("traces: tool", "1.00"), ("traces: tool (tenant)", "1.00")], out  # rows x
    assert sorted(path.name for path in tmp_path.iterdir()) == ["store"], out  # copies removed
