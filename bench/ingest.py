"""End-to-end ingest rate of the embedded stack: OTLP/HTTP in -> queryable in ClickHouse.

Starts `pathgrade up` (bundled Tansu broker, chDB store) on free ports, sends pre-encoded
OTLP protobuf requests of realistic GenAI agent spans (the demo support agent, produced
by the official OTel SDK) over keep-alive HTTP from a few threads, and measures the time
until `SELECT count() FROM spans` shows every span. In the same run it measures the
parse-only rate of the same request bodies (protobuf parse, and parse + canonical decode)
and prints end-to-end / parse-only as the ratio.

It does so twice, one stack after the other on the same bodies: memory only (the
collector's `durable_log: false`: acknowledged once the bundled broker holds it) and with
the durable log (the embedded default: acknowledged once fsynced on local disk, kept until
the store writer and the realtime plane committed it), and prints the durable log's cost
as ratios of CPU per span (the collector's, and the whole stack's) and of the
acknowledged rate.

    python bench/ingest.py [--spans 200000] [--batch 512] [--senders 4]
                           [--store-writer-nice N]

What limits it (2-core machine, ~5 spans per trace): CPU per span in three Python
processes sharing the two cores, which the bench prints per process. On 80-100k spans
(stop 9): the store owner ~84-123 µs (decode ~25-35, span rows ~8, clickhouse-connect
Native serialisation + chDB's insert ~30-35, Kafka fetch), the collector ~62-83 µs
(validate, redact, group, produce), the realtime process ~93-179 µs (a second full
decode, detectors, alerts), the broker ~9-11 µs. End to end 4,661-6,659 spans/s with
the store writer at its default nice 19 (it yields the CPU to the realtime plane, which
then finishes its work inside the measured window), 6,895-7,205 spans/s with
`--store-writer-nice 0`. Per-stage figures: bench/ingest_stages.py.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.schemas.otlp import decode_resource_spans

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import free_port
from pathgrade.stack.options import StackOptions
from pathgrade.web.endpoint import RemoteStore


def template_spans(flavor: str = "genai") -> list:
    """~10k spans of the demo agent in one convention, captured from the OTel SDK."""
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=2000, seed=1, flavor=flavor)
    return list(exporter.get_finished_spans())


def request_bodies(total_spans: int, batch: int, flavor: str = "genai") -> list[bytes]:
    """Request bodies of `batch` spans each; every copy gets fresh trace ids."""
    template = encode_spans(template_spans(flavor))
    spans_per_copy = sum(len(ss.spans) for rs in template.resource_spans for ss in rs.scope_spans)
    rng = random.Random(3)
    bodies = []
    made = 0
    while made < total_spans:
        copy = ExportTraceServiceRequest()
        copy.CopyFrom(template)
        remap: dict[bytes, bytes] = {}
        for rs in copy.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.trace_id = remap.setdefault(span.trace_id, rng.randbytes(16))
        bodies.extend(_split(copy, batch))
        made += spans_per_copy
    return bodies


def _split(request: ExportTraceServiceRequest, batch: int) -> list[bytes]:
    out = []
    spans = [
        (rs, ss, s) for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
    ]
    for start in range(0, len(spans), batch):
        part = ExportTraceServiceRequest()
        rs_out = part.resource_spans.add()
        rs_out.resource.CopyFrom(spans[0][0].resource)
        ss_out = rs_out.scope_spans.add()
        ss_out.scope.CopyFrom(spans[0][1].scope)
        ss_out.spans.extend(s for _, _, s in spans[start : start + batch])
        out.append(part.SerializeToString())
    return out


def span_count(bodies: list[bytes]) -> int:
    return sum(
        len(ss.spans)
        for body in bodies
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
    )


def parse_rates(bodies: list[bytes], spans: int) -> tuple[float, float]:
    """(protobuf parse spans/s, parse + canonical decode spans/s) on one core."""
    started = time.perf_counter()
    for body in bodies:
        ExportTraceServiceRequest.FromString(body)
    parse = spans / (time.perf_counter() - started)
    started = time.perf_counter()
    for body in bodies:
        decode_resource_spans(ExportTraceServiceRequest.FromString(body).resource_spans, "t", 1)
    decode = spans / (time.perf_counter() - started)
    return parse, decode


def post_from_threads(
    port: int, senders: int, next_body: Callable[[], bytes | None], timeout_s: float = 120
) -> None:
    """POST OTLP protobuf bodies to /v1/traces from `senders` keep-alive connections until
    `next_body` (called from every sender thread) returns None; exits on any non-200."""
    failures: list[str] = []

    def sender() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        while (body := next_body()) is not None:
            connection.request(
                "POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"}
            )
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                failures.append(f"HTTP {response.status}")
        connection.close()

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, first: {failures[0]}")


def send_all(port: int, bodies: list[bytes], senders: int) -> None:
    """Send every body once, as fast as the collector answers."""
    queue = list(reversed(bodies))
    lock = threading.Lock()

    def next_body() -> bytes | None:
        with lock:
            return queue.pop() if queue else None

    post_from_threads(port, senders, next_body)


def process_tree(root: int, data_dir: Path | None = None) -> dict[int, str]:
    """pid -> name of `root` and all its descendants (from /proc): the stack's role names
    from `stack.json` in `data_dir` where known, else a short command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        current = frontier.pop()
        children = [pid for pid, parent in parents.items() if parent == current]
        tree.update(children)
        frontier.extend(children)
    roles = {root: "store owner (pathgrade up)"}
    if data_dir is not None:
        state = json.loads((data_dir / "stack.json").read_text())
        roles.update({pid: role for role, pid in state.get("pids", {}).items() if pid})
    return {pid: roles.get(pid) or _command(pid) for pid in tree}


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [Path(w.decode()).name for w in argv if w and not w.startswith(b"-")]
    return " ".join(words[:3])[:40]


SENDERS = "bench senders"


def cpu_seconds(pids: dict[int, str]) -> dict[str, float]:
    """User + system CPU seconds so far, per process (this bench included)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid, name in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[f"{name} [{pid}]"] = (int(fields[11]) + int(fields[12])) / tick
    times = os.times()
    out[SENDERS] = times.user + times.system
    return out


class StackRun:
    """One `pathgrade up` fed every body once: wall times and CPU per process."""

    def __init__(self, spans: int, acked_s: float, queryable_s: float, cpu: dict[str, float]):
        self.spans = spans
        self.acked_s = acked_s
        self.queryable_s = queryable_s
        self.cpu = cpu

    def cpu_per_span_us(self, role: str = "") -> float:
        """CPU µs per span of the stack's processes whose name starts with `role` (all of
        them: ""); the bench's own senders are left out."""
        used = sum(
            seconds
            for name, seconds in self.cpu.items()
            if name.startswith(role) and name != SENDERS
        )
        return used / self.spans * 1e6


def run_stack(bodies: list[bytes], spans: int, args: argparse.Namespace, durable: bool) -> StackRun:
    """Start `pathgrade up` (with the collector's durable log, or memory-only: the log
    off, acknowledged once the bundled broker holds it), send every body, wait until
    every span is queryable, stop it."""
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-bench-"))
    collector_config = data_dir / "collector.yaml"
    collector_config.write_text(f"durable_log: {str(durable).lower()}\n")
    http_port = free_port()
    stack = subprocess.Popen(
        [sys.executable, "-m", "pathgrade.cli", "up", "--data-dir", str(data_dir),
         "--grpc-port", "0", "--http-port", str(http_port), "--config", str(collector_config),
         "--store-writer-nice", str(args.store_writer_nice)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert stack.stdout is not None
        for line in stack.stdout:
            if "pathgrade is up" in line:
                break
        # Keep reading: the stack logs every alert, and a full pipe would stall it.
        threading.Thread(target=stack.stdout.read, daemon=True).start()
        store = RemoteStore(json.loads((data_dir / "stack.json").read_text())["query_url"])
        label = "durable log" if durable else "memory only"
        print(f"{label}: sending {spans} spans in {len(bodies)} requests ...", flush=True)
        pids = process_tree(stack.pid, data_dir)
        cpu_before = cpu_seconds(pids)
        started = time.perf_counter()
        send_all(http_port, bodies, args.senders)
        acked = time.perf_counter() - started
        while store.query("SELECT count() FROM spans").rows[0][0] < spans:
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        cpu_after = cpu_seconds(pids)
    finally:
        stack.terminate()
        stack.wait(timeout=120)
    used = {name: cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after}
    return StackRun(spans, acked, elapsed, used)


def print_run(label: str, run: StackRun) -> None:
    print(f"{label}:")
    print(f"  acknowledged by the collector  {run.spans / run.acked_s:,.0f} spans/s")
    print(f"  end to end (queryable)         {run.spans / run.queryable_s:,.0f} spans/s")
    print("  CPU until queryable, µs per span (the realtime process may still be catching up):")
    for name, seconds in sorted(run.cpu.items(), key=lambda item: -item[1]):
        if seconds > 0.05:
            print(f"    {name:<45} {seconds / run.spans * 1e6:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument(
        "--store-writer-nice", type=int,
        default=StackOptions.model_fields["store_writer_niceness"].default,
        help="passed to pathgrade up: 0 lets the store writer compete with the realtime "
        "plane instead of yielding to it",
    )  # fmt: skip
    args = parser.parse_args()

    print("preparing requests ...", flush=True)
    bodies = request_bodies(args.spans, args.batch)
    spans = span_count(bodies)
    parse, decode = parse_rates(bodies, spans)
    memory = run_stack(bodies, spans, args, durable=False)
    durable = run_stack(bodies, spans, args, durable=True)

    end_to_end = spans / durable.queryable_s
    print(f"spans                          {spans}")
    print(f"parse only (protobuf)          {parse:,.0f} spans/s")
    print(f"parse + canonical decode       {decode:,.0f} spans/s")
    print_run("memory only (durable_log: false)", memory)
    print_run("durable log (the embedded default)", durable)
    print(f"ratio end-to-end / parse-only  {end_to_end / parse:.3f}")
    print(f"ratio end-to-end / decode      {end_to_end / decode:.3f}")
    collector = durable.cpu_per_span_us("collector") / memory.cpu_per_span_us("collector")
    whole = durable.cpu_per_span_us() / memory.cpu_per_span_us()
    print(f"ratio durable / memory only, CPU per span: collector {collector:.3f}, "
          f"whole stack {whole:.3f}")  # fmt: skip
    print(f"ratio durable / memory only, acknowledged rate {memory.acked_s / durable.acked_s:.3f}")


if __name__ == "__main__":
    main()
