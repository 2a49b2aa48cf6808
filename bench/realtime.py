"""Alert latency of the realtime plane under load: an agent turn's top span end -> its alert
on a webhook.

Starts `pathgrade up` (bundled Tansu broker, chDB store, collector child, realtime plane
with the default 1 s quiet window) with a webhook pointing at a receiver in this process,
then sends whole demo agent traces (OTel SDK spans with fresh trace ids) at a target span
rate from a few threads. `--shape rooted` sends them as they are (the agent span is the
trace's root); `--shape remote-parent` puts each agent span inside an HTTP server span
whose parent is remote (span flags), as a web service behind a gateway exports it: the
trace's root never arrives; `--shape both` runs each rate in both shapes on one stack,
rooted first (the baseline), and prints the ratio of their p99s. Each stage starts once the
store holds every span sent before it (a stage never pays for the store catching up on
the one before). Each stage's requests are
encoded before it starts, every trace shifted so its agent span ends at its request's
scheduled send time, so sending costs the bench almost nothing; the latency of an alert is
its receive time minus that end (`trace_end_ns` in the alert: the turn's top span's end),
so a sender running late adds to it. The receiver keeps connections open, as webhook
services do. It prints, per target rate, the achieved ingest rate, achieved/target,
p50/p99/max latency over the alerts of failure scenarios, and the CPU each process of the
stack used; and the in-process cost of one detector run over a 10-span trace (the
baseline measured in the same run).

    python bench/realtime.py [--rates 10000,5000,2500] [--seconds 20] [--senders 4]
                             [--realtime-workers N] [--mix demo|realistic]
                             [--shape rooted|remote-parent|both]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest import (
    TRACES_PATH,
    Request,
    cpu_seconds,
    post_from_threads,
    process_tree,
    realistic_request,
    stack_snapshot,
    template_spans,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span
from pathgrade.content.otlp import decode_resource_spans
from pathgrade.detectors import load_policy, run_detectors
from pathgrade.schemas.model import Trace

from pathgrade.demo.scenarios import FAILURE_SCENARIOS
from pathgrade.stack.broker import free_port

SCENARIO_ATTRIBUTE = "pathgrade.demo.scenario"
TRACES_PER_REQUEST = 20
LOCAL_PARENT = 0x100  # OTLP span flags: the parent's remoteness is known, and it is local
REMOTE_PARENT = 0x300  # ... and it is remote
SHAPES = ("rooted", "remote-parent")
SUSTAINED = 0.95  # achieved/target at or above this counts as sustained


class Receiver(socketserver.ThreadingTCPServer):
    """The alert webhook: records (receive time ns, body) per POST. A minimal HTTP/1.1
    keep-alive server (request line and headers read, Content-Length body, 204 back) that
    defers JSON parsing until the stage is over: it stands in for a webhook service on
    another machine, so the CPU it takes from this one is kept small."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[int, bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def alerts(self, first: int) -> list[tuple[int, dict]]:
        """(receive time ns, alert document) of the POSTs from the `first` on."""
        return [(received_ns, json.loads(body)) for received_ns, body in self.received[first:]]


class _Handler(socketserver.StreamRequestHandler):
    server: Receiver

    def handle(self) -> None:
        rfile, received = self.rfile, self.server.received
        while line := rfile.readline():  # the request line; empty when the client closed
            length = 0
            while line not in (b"\r\n", b"\n", b""):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
                line = rfile.readline()
            body = rfile.read(length)
            received.append((time.time_ns(), body))
            self.wfile.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")


@dataclass
class TemplateTrace:
    """One demo trace (resource, scope, spans with the agent span first), whether it is a
    failure scenario, and its span count."""

    resource_spans: ResourceSpans
    failure: bool
    spans: int


def template_traces(mix: str = "demo", shape: str = "rooted") -> list[TemplateTrace]:
    """The traces of a mix (bench/ingest.py's `demo` or `realistic`) as OTLP, one
    ResourceSpans per trace, in `shape` (`SHAPES`)."""
    request = encode_spans(template_spans()) if mix == "demo" else realistic_request(2000, seed=1)
    by_trace: dict[bytes, ResourceSpans] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.trace_id not in by_trace:
                    out = ResourceSpans(resource=rs.resource)
                    out.scope_spans.add(scope=ss.scope)
                    by_trace[span.trace_id] = out
                by_trace[span.trace_id].scope_spans[0].spans.append(span)
    for rs in by_trace.values():  # the agent span first: its end time anchors the trace
        spans = rs.scope_spans[0].spans
        spans.sort(key=lambda span: bool(span.parent_span_id))
        if shape == "remote-parent":
            in_server_span(spans)
    return [
        TemplateTrace(rs, _scenario(rs) in FAILURE_SCENARIOS, _spans(rs))
        for rs in by_trace.values()
    ]


def in_server_span(spans: Any) -> None:
    """Put the trace's root (its agent span, first) inside an HTTP server span whose
    parent is remote, as the OTel SDK exports a request that came with a `traceparent`:
    the server span last, every other span's parent local."""
    agent = spans[0]
    server = Span(
        trace_id=agent.trace_id, span_id=b"\x5e" * 8, parent_span_id=b"\x9a" * 8,
        name="POST /chat", kind=Span.SPAN_KIND_SERVER, flags=REMOTE_PARENT,
        start_time_unix_nano=agent.start_time_unix_nano - 1_000_000,
        end_time_unix_nano=agent.end_time_unix_nano + 1_000_000,
    )  # fmt: skip
    for span in spans:
        span.flags = LOCAL_PARENT
    agent.parent_span_id = server.span_id
    spans.append(server)


def _spans(rs: ResourceSpans) -> int:
    return len(rs.scope_spans[0].spans)


def _scenario(rs: ResourceSpans) -> str:
    agent = rs.scope_spans[0].spans[0]
    return next((a.value.string_value for a in agent.attributes if a.key == SCENARIO_ATTRIBUTE), "")


def copies(templates: list[TemplateTrace], rng: random.Random) -> Iterator[list[ResourceSpans]]:
    """Endless requests of TRACES_PER_REQUEST copies of demo traces with fresh trace ids."""
    for start in itertools.count(step=TRACES_PER_REQUEST):
        batch = []
        for i in range(TRACES_PER_REQUEST):
            copy = ResourceSpans()
            copy.CopyFrom(templates[(start + i) % len(templates)].resource_spans)
            trace_id = rng.randbytes(16)
            for span in copy.scope_spans[0].spans:
                span.trace_id = trace_id
            batch.append(copy)
        yield batch


def stamp(batch: list[ResourceSpans], end_ns: int) -> bytes:
    """The request body with every trace shifted so its agent span ends at `end_ns`."""
    for rs in batch:
        spans = rs.scope_spans[0].spans
        delta = end_ns - spans[0].end_time_unix_nano
        for span in spans:
            span.start_time_unix_nano += delta
            span.end_time_unix_nano += delta
    return ExportTraceServiceRequest(resource_spans=batch).SerializeToString()


@dataclass(frozen=True)
class PlannedRequest:
    """One request of a stage, encoded ahead of time: sent `due_s` after the stage starts,
    its traces' agent spans stamped to end exactly then."""

    due_s: float
    body: bytes
    spans: int
    failing: tuple[str, ...]  # trace ids of failure scenarios


def plan(
    templates: list[TemplateTrace], rate: float, seconds: float, start_ns: int, seed: int
) -> list[PlannedRequest]:
    """Every request of a stage at `rate` spans/s, stamped for a start at `start_ns`, so
    sending costs the bench no protobuf work (its CPU is not the stack's to lose)."""
    planned: list[PlannedRequest] = []
    due_s = 0.0
    for batch in copies(templates, random.Random(seed)):
        if due_s >= seconds:
            return planned
        spans = sum(len(rs.scope_spans[0].spans) for rs in batch)
        failing = tuple(
            rs.scope_spans[0].spans[0].trace_id.hex()
            for rs in batch
            if _scenario(rs) in FAILURE_SCENARIOS
        )
        body = stamp(batch, start_ns + int(due_s * 1e9))
        planned.append(PlannedRequest(due_s, body, spans, failing))
        due_s += spans / rate
    return planned


@dataclass
class Stage:
    """One target rate: what was sent, the alert latencies, and the CPU it took."""

    target: float
    shape: str
    spans: int
    seconds: float
    failure_traces: int
    alerted_traces: int
    latencies_s: list[float]  # turn's top span end -> webhook receive
    detection_s: list[float]  # turn's top span end -> the plane's detection (`detected_at_ns`)
    cpu_s: dict[str, float]

    @property
    def achieved(self) -> float:
        return self.spans / self.seconds


def schedule_stage(
    templates: list[TemplateTrace], rate: float, seconds: float, stage: int
) -> tuple[list[PlannedRequest], int]:
    """The stage's requests and their start (wall ns), far enough ahead to finish planning
    (a sample of ~20 requests measures the cost); the `stage`-th stage of the run draws
    trace ids of its own (a trace id sent again would be a late span of an evaluated
    trace)."""
    sample_started = time.perf_counter()
    sample = plan(templates, rate, 20 * TRACES_PER_REQUEST * 5 / rate, time.time_ns(), seed=0)
    per_request_s = (time.perf_counter() - sample_started) / max(1, len(sample))
    expected = rate * seconds / max(1, sample[0].spans) if sample else 0
    start_ns = time.time_ns() + int((1.0 + 1.3 * per_request_s * expected) * 1e9)
    planned = plan(templates, rate, seconds, start_ns, seed=int(rate) + 1_000_003 * stage)
    late_s = (time.time_ns() - start_ns) / 1e9
    if late_s > 0:
        print(f"  planning overran the start by {late_s:.1f} s (counted as latency)",
              file=sys.stderr, flush=True)  # fmt: skip
    return planned, start_ns


def send_planned(
    port: int, planned: list[PlannedRequest], start_ns: int, senders: int
) -> tuple[int, float, set[str]]:
    """Send each request at its time; (spans sent, elapsed s, failure trace ids). A sender
    that falls behind the schedule adds its lag to the measured latency, never hides it."""
    queue = list(reversed(planned))
    lock = threading.Lock()
    start_s = start_ns / 1e9

    def next_request() -> Request | None:
        with lock:
            if not queue:
                return None
            request = queue.pop()
        time.sleep(max(0.0, start_s + request.due_s - time.time()))
        return TRACES_PATH, request.body

    time.sleep(max(0.0, start_s - time.time()))
    started = time.monotonic()
    post_from_threads(port, senders, next_request, timeout_s=60)
    elapsed = max(time.monotonic() - started, planned[-1].due_s if planned else 0.0)
    failing = {trace_id for request in planned for trace_id in request.failing}
    return sum(r.spans for r in planned), elapsed, failing


def wait_for_quiet(receiver: Receiver, quiet_s: float = 5.0, limit_s: float = 120.0) -> None:
    """Until no alert arrived for `quiet_s` (or `limit_s` passed)."""
    started = time.monotonic()
    count, changed = -1, time.monotonic()
    while time.monotonic() - changed < quiet_s and time.monotonic() - started < limit_s:
        if len(receiver.received) != count:
            count, changed = len(receiver.received), time.monotonic()
        time.sleep(0.2)


def wait_for_store(data_dir: Path, spans: int, limit_s: float = 180.0) -> None:
    """Until the store writer has stored `spans` (every span sent so far), so a stage does
    not start while the store owner still catches up on the one before (at nice 19 it
    still takes the CPU the stack leaves; the later of two stages would pay for it)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        snapshot = stack_snapshot(data_dir)
        if snapshot is not None and snapshot["store_writer"]["spans"] >= spans:
            break
        time.sleep(0.5)
    waited = time.monotonic() - started
    if waited > 1.0:
        print(f"  waited {waited:.0f} s for the store to catch up", file=sys.stderr, flush=True)


def run_stage(
    port: int, stack_pid: int, data_dir: Path, receiver: Receiver,
    templates: list[TemplateTrace], rate: float, seconds: float, senders: int,
    shape: str = "rooted", stage: int = 0,
) -> Stage:  # fmt: skip
    """Send at one rate, wait for its alerts, and measure."""
    planned, start_ns = schedule_stage(templates, rate, seconds, stage)
    pids = process_tree(stack_pid, data_dir)
    cpu_before = cpu_seconds(pids)
    first_alert = len(receiver.received)
    spans, elapsed, failing = send_planned(port, planned, start_ns, senders)
    cpu_after = cpu_seconds(pids)
    wait_for_quiet(receiver)
    first_by_trace: dict[str, tuple[float, float]] = {}
    for received_ns, alert in receiver.alerts(first_alert):
        if alert["trace_id"] in failing and alert["trace_id"] not in first_by_trace:
            end_ns = alert["trace_end_ns"]
            first_by_trace[alert["trace_id"]] = (
                (received_ns - end_ns) / 1e9, (alert["detected_at_ns"] - end_ns) / 1e9,
            )  # fmt: skip
    cpu = {name: cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after}
    return Stage(
        rate, shape, spans, elapsed, len(failing), len(first_by_trace),
        sorted(t for t, _ in first_by_trace.values()),
        sorted(d for _, d in first_by_trace.values()), cpu,
    )  # fmt: skip


def percentile(sorted_values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; NaN when empty."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def detector_cost_us(templates: list[TemplateTrace], runs: int = 2000) -> tuple[int, float, float]:
    """(spans, p50 µs, p99 µs) of one `run_detectors` over a 10-span demo trace: the
    largest demo trace (8 spans), its last child spans copied with fresh span ids (more
    tool calls of the same turn) until it has 10."""
    template = max(templates, key=lambda t: t.spans)
    spans = decode_resource_spans([template.resource_spans], "t", 0)
    children = [span for span in spans if span.parent_span_id]
    while len(spans) < 10:
        copied = children[-1 - (len(spans) % len(children))]
        spans.append(dataclasses.replace(copied, span_id=f"{len(spans):016x}"))
    trace = Trace("t", spans[0].trace_id, spans)
    root = trace.root or spans[0]
    resolved = load_policy(None).resolve(root.service_name, root.genai.agent_name, "medium")
    context = resolved.context([])
    costs = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        run_detectors(trace, resolved, context)
        costs.append((time.perf_counter_ns() - started) / 1e3)
    costs.sort()
    return len(spans), percentile(costs, 0.5), percentile(costs, 0.99)


def start_stack(
    data_dir: Path, http_port: int, webhook: str, realtime_workers: int
) -> subprocess.Popen:
    """`pathgrade up` with the webhook; its output drained to a log file in `data_dir`."""
    log = (data_dir / "stack.log").open("w")
    stack = subprocess.Popen(
        [sys.executable, "-m", "pathgrade.cli", "up", "--data-dir", str(data_dir),
         "--grpc-port", "0", "--http-port", str(http_port), "--capture-tools", "*",
         "--alert-webhook", webhook, "--realtime-workers", str(realtime_workers),
         "--status-every", "1"],
        stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    while "pathgrade is up" not in (data_dir / "stack.log").read_text():
        if stack.poll() is not None:
            raise SystemExit(f"pathgrade up exited:\n{(data_dir / 'stack.log').read_text()}")
        time.sleep(0.2)
    return stack


def report(stages: list[Stage], detector: tuple[int, float, float]) -> None:
    print()
    print(
        "latency = agent turn's top span end -> alert received on the webhook "
        "(detected: -> detection)"
    )
    print(
        "shape          target  achieved  ratio  failure traces  alerted   p50 s   p99 s   max s"
        "  detected p50/p99 s"
    )
    for s in stages:
        lat = s.latencies_s
        print(
            f"{s.shape:<13}  {s.target:>6,.0f}  {s.achieved:>8,.0f}  {s.achieved / s.target:5.2f}  "
            f"{s.failure_traces:>14}  {s.alerted_traces:>7}  {percentile(lat, 0.5):6.2f}  "
            f"{percentile(lat, 0.99):6.2f}  {max(lat, default=float('nan')):6.2f}  "
            f"{percentile(s.detection_s, 0.5):8.2f} / {percentile(s.detection_s, 0.99):.2f}"
        )
    sustained = [s for s in stages if s.achieved / s.target >= SUSTAINED]
    if sustained:
        best = max(sustained, key=lambda s: s.target)
        print(
            f"highest sustained rate: {best.target:,.0f} spans/s, "
            f"p99 {percentile(best.latencies_s, 0.99):.2f} s"
        )
    for n, s in enumerate(stages):
        baseline = next((b for b in reversed(stages[:n]) if b.shape == "rooted"), None)
        if s.shape != "rooted" and baseline is not None and baseline.latencies_s:
            ratio = percentile(s.latencies_s, 0.99) / percentile(baseline.latencies_s, 0.99)
            print(f"p99 {s.shape} / rooted (the stage before) at {s.target:,.0f} spans/s: "
                  f"{ratio:.2f}")  # fmt: skip
    for s in stages:
        busiest = sorted(s.cpu_s.items(), key=lambda item: -item[1])
        usage = ", ".join(f"{name} {cpu / s.seconds:.0%}" for name, cpu in busiest if cpu > 0.05)
        print(f"CPU at {s.target:,.0f} spans/s, {s.shape} (of one core): {usage}")
    spans, p50, p99 = detector
    print(f"detector run over a {spans}-span trace: p50 {p50:.0f} µs, p99 {p99:.0f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rates", default="10000", help="target spans/s, comma-separated (each a stage)"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="send time per stage")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument(
        "--warmup", type=float, default=5.0,
        help="seconds of traffic at 100 spans/s before the stages, not measured (the "
        "first seconds after start pay one-off connection and metadata set-up)",
    )  # fmt: skip
    parser.add_argument(
        "--mix", choices=("demo", "realistic"), default="demo",
        help="bench/ingest.py's mixes: the demo deck, or realistic traffic (5%% failures, "
        "6-30 spans per trace)",
    )  # fmt: skip
    parser.add_argument(
        "--shape", choices=(*SHAPES, "both"), default="rooted",
        help="rooted: the agent span is the trace's root; remote-parent: it runs inside an "
        "HTTP server span whose parent is remote (the trace's root never arrives); both: "
        "each rate in both shapes, rooted first",
    )  # fmt: skip
    parser.add_argument(
        "--realtime-workers", type=int, default=1,
        help="realtime processes `pathgrade up` runs (more than one share conversation turns)",
    )  # fmt: skip
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]

    print("preparing demo traces ...", file=sys.stderr, flush=True)
    shapes = SHAPES if args.shape == "both" else (args.shape,)
    templates = {shape: template_traces(args.mix, shape) for shape in shapes}
    # the documented baseline whatever the mix: the demo deck's largest trace, padded to 10
    # spans (a realistic template holds up to 30), rooted: one turn
    detector = detector_cost_us(template_traces("demo"))
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-bench-realtime-"))
    http_port = free_port()
    stack = start_stack(data_dir, http_port, receiver.url, args.realtime_workers)
    stages = []
    sent = 0  # spans sent so far: each stage starts once the store holds them
    try:
        if args.warmup > 0:
            print(f"warm-up: 100 spans/s for {args.warmup:.0f} s ...", file=sys.stderr, flush=True)
            sent += run_stage(
                http_port, stack.pid, data_dir, receiver, templates[shapes[0]], 100,
                args.warmup, args.senders,
            ).spans  # fmt: skip
        for rate in rates:
            for shape in shapes:
                wait_for_store(data_dir, sent)
                print(f"stage: {rate:,.0f} spans/s for {args.seconds:.0f} s, {shape} ...",
                      file=sys.stderr, flush=True)  # fmt: skip
                stages.append(
                    run_stage(http_port, stack.pid, data_dir, receiver, templates[shape], rate,
                              args.seconds, args.senders, shape, len(stages) + 1)
                )  # fmt: skip
                sent += stages[-1].spans
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        receiver.shutdown()
    report(stages, detector)


if __name__ == "__main__":
    main()
