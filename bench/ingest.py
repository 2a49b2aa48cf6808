"""What the embedded stack sustains: OTLP/HTTP in -> every span stored AND every trace
evaluated by the realtime plane, with the CPU each span costs per process.

Starts `pathgrade up` (bundled Tansu broker, chDB store) on free ports, waits until a
warm-up of a few traces of its own is stored and evaluated (so the consumer groups' first
joins, seconds long on a fresh broker, are not counted as the stack's pace), sends
pre-encoded OTLP protobuf requests over keep-alive HTTP from a few threads as fast as the
collector answers, and stops the clock when the stack's status counters show every span
stored (then confirmed by `SELECT count()` and distinct span ids in `spans`) and every
trace evaluated by the realtime processes. It prints the sustained rate, CPU µs per span
per process (collector, store owner, realtime, broker, the rest) and in total, and,
measured in the same run, the CPU of parsing the same request bodies (protobuf parse
alone, and parse + canonical decode) with the ratio total / parse-only.

Mixes (`--mix`):
- `realistic` (default): conversations of 1-6 turns of the demo support agent, about 5%
  of the turns a failure or a tool error (the rest clean scenarios), so about 10% of the
  traces are sampled (the default sampler: 5% base rate, every alerting trace, half the
  tool errors); each trace padded to 6-30 spans with the plain spans auto-instrumentation
  adds around model and tool calls (an HTTP client span under a model call, a database
  or HTTP span under a tool call), all from the official OTel SDK and encoder.
- `demo`: the demo agent's deck as it is (~5 spans per trace, 35% failures, 10% tool
  errors: alerts on most traces and samples most of them).
- `realistic-logs`: the realistic mix twice through this checkout, in one run: as it is
  (messages as span attributes) and with every model call's messages moved to a
  `gen_ai.client.inference.operation.details` log record tied to its span (structured
  values, as the conventions want on events; the span keeps no content), each batch's
  records sent to `/v1/logs` beside its spans. The table shows both and the ratio of CPU
  per span, records / attributes (target: within 1.3x); a run is done when every record
  is stored too.

Against another checkout (`--against PYTHON`, the python of that checkout's venv, e.g. of
a `git worktree` of main; or `--against COMMIT`, which `baseline_python` checks out as a
`git worktree` with a venv of its own, once): the same bodies go through that checkout's
`pathgrade up` and this one's, alternately for `--rounds` rounds, and the table shows both
and the ratios. Each variant is a label, a python and extra `pathgrade up` arguments
(`--up-arg`, for the variant under test), so other comparisons plug in the same way.

    python bench/ingest.py [--spans 200000] [--mix realistic|realistic-logs|demo] [--batch 512]
                           [--senders 4] [--rate SPANS_PER_S] [--against PYTHON|COMMIT]
                           [--rounds 1]
                           [--store-writer-nice N] [--up-arg ARG ...] [--durable-cost]

`--durable-cost` runs this checkout twice on the same bodies instead: memory only (the
collector's `durable_log: false`, acknowledged once the bundled broker holds it) and with
the durable log (the embedded default: acknowledged once fsynced on local disk), and the
ratios are the durable log's cost.

Figures: docs/realtime.md ("What a span costs end to end"). Per-stage figures of the
store path: bench/ingest_stages.py.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as LogRecordProto
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store.remote import RemoteStore
from pathgrade.content.otlp import decode_resource_spans
from pathgrade.schemas import genai
from pathgrade.schemas.json_text import parse_json

from pathgrade.demo import scenarios
from pathgrade.demo.sender import SERVICE_NAMES, emit_turn, send_demo_traces
from pathgrade.demo.writers import writer_for
from pathgrade.stack.broker import free_port
from pathgrade.stack.options import StackOptions
from pathgrade.stack.store_access import StatusUnavailable, stack_status

FAILURE_SHARE = 0.05  # realistic mix: turns that are a failure scenario or a tool error
CONVERSATION_TURNS = (1, 6)
SPANS_PER_TRACE = (6, 30)
WAIT_LIMIT_S = 900.0  # give up waiting for the stack to catch up after this long
WARM_UP_TRACES = 3  # stored and evaluated before the clock starts (`warm_up`)
ROLES = ("collector", "store owner", "realtime", "broker")  # the table's rows, in order
TRACES_PATH, LOGS_PATH = "/v1/traces", "/v1/logs"
RETRYABLE = frozenset({429, 502, 503, 504})  # OTLP/HTTP: "the client SHOULD retry"
RETRY_AFTER_S = 1.0
RETRY_LIMIT = 300  # sends of one request before the bench gives up
BASELINES_DIR = Path(tempfile.gettempdir()) / "pathgrade-baselines"
"""Where `baseline_python` keeps the checkouts of `--against COMMIT`."""
Request = tuple[str, bytes]  # an OTLP/HTTP path and the protobuf body posted to it
MESSAGE_KEYS = frozenset({genai.INPUT_MESSAGES, genai.OUTPUT_MESSAGES, genai.SYSTEM_INSTRUCTIONS})


# --------------------------------------------------------------------------- the demo mix


def template_spans(flavor: str = "genai") -> list:
    """~10k spans of the demo agent in one convention, captured from the OTel SDK."""
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=2000, seed=1, flavor=flavor)
    return list(exporter.get_finished_spans())


def request_bodies(
    total_spans: int, batch: int, flavor: str = "genai", seed: int = 3
) -> list[bytes]:
    """Demo mix: request bodies of `batch` spans each; every copy of the ~10k template
    spans gets fresh trace ids (drawn from `seed`)."""
    template = encode_spans(template_spans(flavor))
    spans_per_copy = sum(len(ss.spans) for rs in template.resource_spans for ss in rs.scope_spans)
    rng = random.Random(seed)
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
    """The spans of `request` (in its order) as requests of `batch` spans, under its first
    resource and scope."""
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


# --------------------------------------------------------------------------- the realistic mix


def realistic_turns(seed: int) -> Iterator[scenarios.TurnPlan]:
    """Endless, seeded demo turns: conversations of 1-6 turns, FAILURE_SHARE of the turns
    a failure scenario or a tool error, the others clean scenarios."""
    rng = random.Random(seed)
    book = scenarios._customers(rng)
    failing = (*scenarios.FAILURE_SCENARIOS, *scenarios.TOOL_ERROR_SCENARIOS)
    session: scenarios._Session | None = None
    while True:
        if session is None or session.turns_left == 0:
            session = scenarios._Session(
                customer=rng.choice(book),
                conversation_id=f"conv-{rng.getrandbits(48):012x}",
                model=rng.choice(scenarios._MODELS),
                turns_left=rng.randint(*CONVERSATION_TURNS),
            )
        session.turns_left -= 1
        scenario = rng.choice(
            failing if rng.random() < FAILURE_SHARE else scenarios.CLEAN_SCENARIOS
        )
        kind, script = scenarios.SCENARIOS[scenario]
        other = rng.choice([c for c in book if c is not session.customer])
        yield script(scenarios._TurnBuilder(rng, session, scenario, kind), other)


def realistic_request(traces: int, seed: int) -> ExportTraceServiceRequest:
    """`traces` realistic turns as one OTLP request (the SDK's export order: a trace's
    spans as they end, root last), each padded to 6-30 spans (`pad_trace`)."""
    exporter = InMemorySpanExporter()
    turns = realistic_turns(seed)
    writer = writer_for("genai")
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAMES["genai"]}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pathgrade.demo")
    now = time.time_ns()
    for index in range(traces):
        emit_turn(tracer, writer, next(turns), now + index * 1_000_000)
    request = encode_spans(exporter.get_finished_spans())
    rng = random.Random(seed + 1)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            by_trace: dict[bytes, list[SpanProto]] = {}
            for span in ss.spans:
                by_trace.setdefault(span.trace_id, []).append(span)
            padded = [s for spans in by_trace.values() for s in pad_trace(spans, rng)]
            del ss.spans[:]
            ss.spans.extend(padded)
    return request


def pad_trace(spans: list[SpanProto], rng: random.Random) -> list[SpanProto]:
    """The trace's spans plus plain child spans of its model and tool calls (what HTTP and
    database auto-instrumentation adds) up to a size drawn from SPANS_PER_TRACE, each
    child just before its parent (it ends first)."""
    target = rng.randint(*SPANS_PER_TRACE)
    parents = [s for s in spans if s.parent_span_id]
    children: dict[bytes, list[SpanProto]] = {}
    for _ in range(max(0, target - len(spans))):
        parent = rng.choice(parents)
        children.setdefault(parent.span_id, []).append(_plain_child(parent, rng))
    return [c for s in spans for c in (*children.get(s.span_id, ()), s)]


def _plain_child(parent: SpanProto, rng: random.Random) -> SpanProto:
    """An HTTP client span (under a model call) or a database query (under a tool call)
    inside the parent's time."""
    is_chat = parent.name.startswith("chat ")
    length = parent.end_time_unix_nano - parent.start_time_unix_nano
    start = parent.start_time_unix_nano + rng.randrange(max(1, length // 2))
    if is_chat:
        name, attributes = "POST", {
            "http.request.method": "POST", "url.full": "https://api.openai.com/v1/chat/completions",
            "server.address": "api.openai.com", "http.response.status_code": 200,
        }  # fmt: skip
    else:
        name, attributes = "SELECT support.orders", {
            "db.system.name": "postgresql", "db.collection.name": "orders",
            "db.operation.name": "SELECT", "server.address": "db.internal",
        }  # fmt: skip
    return SpanProto(
        trace_id=parent.trace_id, span_id=rng.randbytes(8), parent_span_id=parent.span_id,
        name=name, kind=SpanProto.SPAN_KIND_CLIENT, start_time_unix_nano=start,
        end_time_unix_nano=start + rng.randrange(1, max(2, length // 2)),
        attributes=[KeyValue(key=k, value=_any(v)) for k, v in attributes.items()],
    )  # fmt: skip


def _any(value: str | int) -> AnyValue:
    return AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)


def realistic_bodies(total_spans: int, batch: int, seed: int = 5) -> list[bytes]:
    """Realistic mix: request bodies of `batch` spans each, about `total_spans` spans in
    all, every trace generated afresh from `seed` (no trace or conversation repeats)."""
    mean = sum(SPANS_PER_TRACE) / 2
    return _split(realistic_request(max(1, round(total_spans / mean)), seed=seed), batch)


def messages_as_records(body: bytes) -> tuple[bytes, bytes]:
    """One traces body with its spans' messages moved out (`MESSAGE_KEYS`), and a logs
    body holding them: per span that had any, a `gen_ai.client.inference.operation.details`
    record tied to it at its end, the messages as structured values."""
    request = ExportTraceServiceRequest.FromString(body)
    logs = ExportLogsServiceRequest()
    for rs in request.resource_spans:
        resource_logs = logs.resource_logs.add()
        resource_logs.resource.CopyFrom(rs.resource)
        for ss in rs.scope_spans:
            scope_logs = resource_logs.scope_logs.add()
            scope_logs.scope.CopyFrom(ss.scope)
            for span in ss.spans:
                moved = [kv for kv in span.attributes if kv.key in MESSAGE_KEYS]
                if not moved:
                    continue
                kept = [kv for kv in span.attributes if kv.key not in MESSAGE_KEYS]
                del span.attributes[:]
                span.attributes.extend(kept)
                scope_logs.log_records.append(LogRecordProto(
                    time_unix_nano=span.end_time_unix_nano,
                    observed_time_unix_nano=span.end_time_unix_nano,
                    trace_id=span.trace_id, span_id=span.span_id,
                    event_name=genai.EVENT_INFERENCE_DETAILS,
                    attributes=[KeyValue(key=genai.OPERATION_NAME, value=_any(genai.OP_CHAT)),
                                *(KeyValue(key=kv.key, value=_structured(
                                    parse_json(kv.value.string_value))) for kv in moved)],
                ))  # fmt: skip
    return request.SerializeToString(), logs.SerializeToString()


def _structured(value: object) -> AnyValue:
    """A JSON value as an OTLP AnyValue (maps as key-value lists, lists as arrays)."""
    if isinstance(value, dict):
        pairs = [KeyValue(key=str(k), value=_structured(v)) for k, v in value.items()]
        return AnyValue(kvlist_value=KeyValueList(values=pairs))
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_structured(v) for v in value]))
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue() if value is None else AnyValue(string_value=str(value))


def log_record_count(requests: list[Request]) -> int:
    return sum(
        len(sl.log_records)
        for path, body in requests
        if path == LOGS_PATH
        for rl in ExportLogsServiceRequest.FromString(body).resource_logs
        for sl in rl.scope_logs
    )


MIXES: dict[str, Callable[[int, int], list[bytes]]] = {
    "realistic": realistic_bodies,
    "demo": request_bodies,
}
LOGS_MIX = "realistic-logs"
"""The realistic mix, messages as span attributes against messages as records."""


# --------------------------------------------------------------------------- measuring


def traces_bodies(requests: list[Request]) -> list[bytes]:
    return [body for path, body in requests if path == TRACES_PATH]


def span_count(bodies: list[bytes]) -> int:
    return sum(
        len(ss.spans)
        for body in bodies
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
    )


def trace_count(bodies: list[bytes]) -> int:
    return len(
        {
            span.trace_id
            for body in bodies
            for rs in ExportTraceServiceRequest.FromString(body).resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        }
    )


def _cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def parse_costs_us(bodies: list[bytes], spans: int) -> tuple[float, float]:
    """CPU µs per span of (protobuf parse, parse + canonical decode) of the bodies."""
    started = _cpu_now()
    for body in bodies:
        ExportTraceServiceRequest.FromString(body)
    parse = (_cpu_now() - started) / spans * 1e6
    started = _cpu_now()
    for body in bodies:
        decode_resource_spans(ExportTraceServiceRequest.FromString(body).resource_spans, "t", 1)
    decode = (_cpu_now() - started) / spans * 1e6
    return parse, decode


def post_from_threads(
    port: int,
    senders: int,
    next_request: Callable[[], Request | None],
    timeout_s: float = 120,
    retry: bool = False,
) -> int:
    """POST OTLP protobuf requests from `senders` keep-alive connections until
    `next_request` (called from every sender thread) returns None; exits on any non-200
    or any error in a sender. With `retry`, as an OTel exporter does, a request answered
    with a status OTLP/HTTP calls retryable (RETRYABLE: a server at capacity) is sent
    again RETRY_AFTER_S later, and one whose keep-alive connection the server had closed
    is sent again on a new one, up to RETRY_LIMIT sends. Returns the number of requests
    sent again."""
    failures: list[str] = []
    retried: list[int] = []

    def sender() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        try:
            while (request := next_request()) is not None:
                path, body = request
                for _ in range(RETRY_LIMIT):
                    headers = {"Content-Type": "application/x-protobuf"}
                    try:
                        connection.request("POST", path, body, headers)
                        response = connection.getresponse()
                        response.read()
                    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                        if not retry:  # a keep-alive connection the server closed while idle
                            raise
                        connection.close()  # the next request connects again
                        retried.append(0)
                        continue
                    if not (retry and response.status in RETRYABLE):
                        break
                    retried.append(response.status)
                    time.sleep(RETRY_AFTER_S)
                else:
                    raise RuntimeError(f"{path}: sent {RETRY_LIMIT} times, never taken")
                if response.status != 200:
                    failures.append(f"HTTP {response.status}")
        except Exception as exc:  # a sender that dies fails the bench, not only its thread
            failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, first: {failures[0]}")
    return len(retried)


def send_all(
    port: int,
    requests: list[Request],
    senders: int,
    rate: float | None = None,
    retry: bool = False,
) -> int:
    """Send every request once, in order from `senders` threads, as fast as the collector
    answers, or paced at `rate` spans/s (a request leaves once the spans before it are
    due: a steady stream, as an application's exporter sends); `retry` as
    `post_from_threads` takes it, which returns what send_all returns."""
    queue = list(reversed(requests))
    spans = [span_count([body]) if path == TRACES_PATH else 0 for path, body in queue]
    lock = threading.Lock()
    started = time.perf_counter()
    due_spans = 0  # spans sent or on their way

    def next_request() -> Request | None:
        nonlocal due_spans
        with lock:
            if not queue:
                return None
            due_s = due_spans / rate if rate else 0.0
            due_spans += spans.pop()
            request = queue.pop()
        time.sleep(max(0.0, started + due_s - time.perf_counter()))
        return request

    return post_from_threads(port, senders, next_request, retry=retry)


def send_traces(port: int, bodies: list[bytes], senders: int) -> None:
    """`send_all` of OTLP trace request bodies (to /v1/traces)."""
    send_all(port, [(TRACES_PATH, body) for body in bodies], senders)


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


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux); OSError once it is gone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: dict[int, str]) -> dict[str, float]:
    """User + system CPU seconds so far, per process (this bench included)."""
    out = {}
    for pid, name in pids.items():
        with suppress(OSError):  # the process is gone
            out[f"{name} [{pid}]"] = process_cpu_s(pid)
    times = os.times()
    out["bench senders + webhook"] = times.user + times.system
    return out


def role_of(process: str) -> str:
    """The table row of a process name from `cpu_seconds` (`ROLES`, else "other")."""
    for role, starts in (
        ("collector", ("collector",)), ("store owner", ("store owner",)),
        ("realtime", ("realtime",)), ("broker", ("broker", "tansu")),
    ):  # fmt: skip
        if process.startswith(starts):
            return role
    return "other"


def baseline_python(against: str) -> str:
    """The python of the checkout `--against` names: `against` itself when it is a file (a
    checkout's venv python), else a commit of this repository, checked out (detached) as a
    `git worktree` under BASELINES_DIR with a venv of its own (`pip install -e`), built
    once and kept for later runs."""
    if Path(against).is_file():
        return against
    repo = Path(__file__).resolve().parent.parent
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{against}^{{commit}}"],
        capture_output=True, text=True,
    )  # fmt: skip
    if found.returncode != 0:
        raise SystemExit(f"--against {against}: neither a python nor a commit of {repo}")
    commit = found.stdout.strip()
    home = BASELINES_DIR / commit[:12]
    python = home / ".venv" / "bin" / "python"
    if python.is_file():
        return str(python)
    print(f"building a checkout of {commit[:12]} with its own venv in {home} ...", flush=True)
    if not home.exists():
        git = ["git", "-C", str(repo), "worktree", "add", "--detach", str(home), commit]
        subprocess.run(git, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(home / ".venv")], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(home)], check=True)
    return str(python)


@dataclass(frozen=True)
class Variant:
    """One stack to measure: a label, the python of its checkout and extra `up` arguments."""

    label: str
    python: str
    up_args: tuple[str, ...] = ()


@dataclass
class Run:
    """One pass of the bodies through one variant's stack."""

    variant: Variant
    acked_s: float
    stored_s: float
    evaluated_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)  # role -> CPU seconds
    alerts: int = 0
    sampled: int = 0

    @property
    def sustained_s(self) -> float:
        return max(self.stored_s, self.evaluated_s)


def stored_all(store: RemoteStore, spans: int, snapshot: dict | None, records: int = 0) -> bool:
    """Every span (and record) is in the store: the store writer's counter first (in the
    status document the bench reads anyway: a query per tick would cost the store owner
    more CPU than the spans it measures at low rates), then count() (a batch the writer
    inserted twice counts twice until merged), then distinct span ids (and records)."""
    if snapshot is None or snapshot["store_writer"]["spans"] < spans:
        return False
    if store.query("SELECT count() FROM spans").rows[0][0] < spans:
        return False
    if store.query("SELECT uniqExact(TraceId, SpanId) FROM spans").rows[0][0] < spans:
        return False
    stored_records = "SELECT uniqExact(RecordHash) FROM logs"
    return records == 0 or store.query(stored_records).rows[0][0] >= records


def stack_snapshot(data_dir: Path) -> dict | None:
    """The stack's latest status counters (`pathgrade.stack.status`); None while it does
    not answer."""
    try:
        return stack_status(data_dir)["snapshot"]
    except (StatusUnavailable, KeyError):
        return None


def realtime_evaluated(snapshot: dict | None) -> tuple[int, int, int] | None:
    """(traces evaluated for the first time, alerts, sampled) summed over the realtime
    processes' counters in `snapshot`; None while one of them does not answer."""
    workers = snapshot and snapshot.get("realtime")
    if not workers or any(w is None for w in workers):
        return None
    first = sum(w["traces_evaluated"] - w.get("re_evaluations", 0) for w in workers)
    return first, sum(w["alerts"] for w in workers), sum(w["sampled"] for w in workers)


def start_stack(variant: Variant, data_dir: Path, http_port: int, nice: int) -> subprocess.Popen:
    """`pathgrade up` of the variant's checkout, its output drained to a log file."""
    with (data_dir / "stack.log").open("w") as log:  # the child writes to its own copy
        stack = subprocess.Popen(
            [variant.python, "-m", "pathgrade.cli", "up", "--data-dir", str(data_dir),
             "--grpc-port", "0", "--http-port", str(http_port), "--store-writer-nice",
             str(nice), "--status-every", "1", *variant.up_args],
            stdout=log, stderr=subprocess.STDOUT, text=True, cwd=tempfile.gettempdir(),
        )  # fmt: skip
    while "pathgrade is up" not in (data_dir / "stack.log").read_text():
        if stack.poll() is not None:
            raise SystemExit(f"pathgrade up exited:\n{(data_dir / 'stack.log').read_text()}")
        time.sleep(0.2)
    return stack


def warm_up(http_port: int, data_dir: Path, store: RemoteStore) -> tuple[int, int, int, int]:
    """Send WARM_UP_TRACES realistic traces of their own and wait until they are stored
    and evaluated: the consumer groups' first joins on a fresh broker (1.9 to 15 s from
    `pathgrade is up` to the first span stored, 1.9 to 5.9 s to the first trace evaluated,
    in three starts on 2026-12-03) are the stack starting, not what it sustains. Returns
    the (spans, traces, alerts, sampled) the warm-up added, which the run leaves out."""
    bodies = _split(realistic_request(WARM_UP_TRACES, seed=7), 512)
    spans, traces = span_count(bodies), trace_count(bodies)
    send_traces(http_port, bodies, 1)
    deadline = time.perf_counter() + WAIT_LIMIT_S
    while time.perf_counter() < deadline:
        snapshot = stack_snapshot(data_dir)
        counted = realtime_evaluated(snapshot)
        if counted is not None and counted[0] >= traces and stored_all(store, spans, snapshot):
            return spans, traces, counted[1], counted[2]
        time.sleep(0.1)
    raise SystemExit("the stack did not store and evaluate the warm-up traces in time")


def run_once(variant: Variant, requests: list[Request], spans: int, traces: int, args) -> Run:
    """Send the requests through a fresh stack of `variant`, once it stored and evaluated a
    warm-up, and wait until it caught up."""
    records = log_record_count(requests)
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-bench-"))
    http_port = free_port()
    stack = start_stack(variant, data_dir, http_port, args.store_writer_nice)
    try:
        state = json.loads((data_dir / "stack.json").read_text())
        # a checkout from before the owner token (an `--against` baseline) writes none
        store = RemoteStore(state["query_url"], state.get("token", ""))
        warm_spans, warm_traces, warm_alerts, warm_sampled = warm_up(http_port, data_dir, store)
        stored_target, evaluated_target = spans + warm_spans, traces + warm_traces
        pids = process_tree(stack.pid, data_dir)
        cpu_before = cpu_seconds(pids)
        started = time.perf_counter()
        send_all(http_port, requests, args.senders, args.rate)
        acked = time.perf_counter() - started
        stored_at = evaluated_at = None
        counted = None
        while stored_at is None or evaluated_at is None:
            if time.perf_counter() - started > WAIT_LIMIT_S:
                raise SystemExit(f"{variant.label}: the stack did not catch up in time")
            now = time.perf_counter() - started
            snapshot = stack_snapshot(data_dir)
            if stored_at is None and stored_all(store, stored_target, snapshot, records):
                stored_at = now
            if evaluated_at is None and (counted := realtime_evaluated(snapshot)) is not None:
                evaluated_at = now if counted[0] >= evaluated_target else None
            time.sleep(0.1)
        cpu_after = cpu_seconds(pids)
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        shutil.rmtree(data_dir, ignore_errors=True)  # the run's store, log and broker log
    cpu: dict[str, float] = {}
    for name, seconds in cpu_after.items():
        if not name.startswith("bench"):
            role = role_of(name)
            cpu[role] = cpu.get(role, 0.0) + seconds - cpu_before.get(name, 0.0)
    assert counted is not None
    alerts, sampled = counted[1] - warm_alerts, counted[2] - warm_sampled
    return Run(variant, acked, stored_at, evaluated_at, cpu, alerts, sampled)


def report(runs: list[Run], spans: int, traces: int, parse_us: float, decode_us: float) -> None:
    """The per-process table of every run, the sustained rates and the ratios."""
    print(f"\n{spans} spans in {traces} traces ({spans / traces:.1f} spans per trace)")
    print(f"parse only (protobuf)        {parse_us:6.2f} µs CPU per span")
    print(f"parse + canonical decode     {decode_us:6.2f} µs CPU per span")
    labels = [f"{r.variant.label}#{n}" for n, r in enumerate(runs, 1)]
    print("\nCPU µs per span until stored and evaluated".ljust(44) + "".join(
        f"{label:>14}" for label in labels))  # fmt: skip
    rows = [*ROLES, "other"]
    for role in rows:
        values = [run.cpu_s.get(role, 0.0) / spans * 1e6 for run in runs]
        if any(values):
            print(f"  {role:<41}" + "".join(f"{v:14.1f}" for v in values))
    totals = [sum(run.cpu_s.values()) / spans * 1e6 for run in runs]
    print(f"  {'total':<41}" + "".join(f"{v:14.1f}" for v in totals))
    print(f"  {'total / parse-only':<41}" + "".join(f"{v / parse_us:14.1f}" for v in totals))
    for title, seconds in (
        ("acknowledged by the collector, spans/s", lambda r: r.acked_s),
        ("stored, spans/s", lambda r: r.stored_s),
        ("evaluated by the realtime plane, spans/s", lambda r: r.evaluated_s),
        ("sustained (stored and evaluated), spans/s", lambda r: r.sustained_s),
    ):  # fmt: skip
        print(f"{title:<43}" + "".join(f"{spans / seconds(r):14,.0f}" for r in runs))
    print(f"{'alerts':<43}" + "".join(f"{r.alerts:14}" for r in runs))
    print(f"{'traces sampled':<43}" + "".join(f"{r.sampled / traces:14.1%}" for r in runs))
    by_label: dict[str, list[Run]] = {}
    for run in runs:
        by_label.setdefault(run.variant.label, []).append(run)
    if len(by_label) == 2:
        (base, base_runs), (label, new_runs) = by_label.items()
        rate = sum(spans / r.sustained_s for r in new_runs) / len(new_runs)
        base_rate = sum(spans / r.sustained_s for r in base_runs) / len(base_runs)
        cpu = sum(sum(r.cpu_s.values()) for r in new_runs) / len(new_runs)
        base_cpu = sum(sum(r.cpu_s.values()) for r in base_runs) / len(base_runs)
        print(f"\nsustained rate {label} / {base}: {rate / base_rate:.2f}   "
              f"CPU per span {label} / {base}: {cpu / base_cpu:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--mix", choices=sorted([*MIXES, LOGS_MIX]), default="realistic")
    parser.add_argument("--batch", type=int, default=512, help="spans per request")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument(
        "--rate", type=float, metavar="SPANS_PER_S",
        help="send at this steady rate instead of as fast as the collector answers (the "
        "CPU per span then counts what the stack spends idling between requests)",
    )  # fmt: skip
    parser.add_argument(
        "--against", metavar="PYTHON|COMMIT",
        help="also run the stack of the checkout this python belongs to (e.g. "
        "/work/wt-main-base/.venv/bin/python), alternately with this one",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="runs of each variant")
    parser.add_argument(
        "--store-writer-nice", type=int,
        default=StackOptions.model_fields["store_writer_niceness"].default,
        help="passed to pathgrade up: 0 lets the store writer compete with the realtime "
        "plane instead of yielding to it",
    )  # fmt: skip
    parser.add_argument(
        "--up-arg", action="append", default=[],
        help="an extra `pathgrade up` argument for this checkout's stack (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--durable-cost", action="store_true",
        help="this checkout twice: memory only (the collector's durable_log off) against the "
        "durable log (the embedded default), for the durable log's cost",
    )  # fmt: skip
    args = parser.parse_args()

    print(f"preparing {args.mix} requests ...", flush=True)
    bodies = MIXES["realistic" if args.mix == LOGS_MIX else args.mix](args.spans, args.batch)
    spans, traces = span_count(bodies), trace_count(bodies)
    parse_us, decode_us = parse_costs_us(bodies, spans)
    requests = [(TRACES_PATH, body) for body in bodies]
    variants = [Variant("this", sys.executable, tuple(args.up_arg))]
    mixes = {"this": requests}
    if args.mix == LOGS_MIX:
        variants = [Variant("span attributes", sys.executable, tuple(args.up_arg)),
                    Variant("log records", sys.executable, tuple(args.up_arg))]  # fmt: skip
        moved = [messages_as_records(body) for body in bodies]
        mixes = {
            "span attributes": requests,
            "log records": [r for t, logs in moved for r in ((TRACES_PATH, t), (LOGS_PATH, logs))],
        }
        print(f"{log_record_count(mixes['log records'])} inference-details records")
    elif args.against:
        variants.insert(0, Variant("against", baseline_python(args.against)))
    elif args.durable_cost:
        memory_only = Path(tempfile.mkdtemp(prefix="pathgrade-bench-")) / "memory-only.yaml"
        memory_only.write_text("durable_log: false\n")
        variants = [
            Variant("memory only", sys.executable, ("--config", str(memory_only), *args.up_arg)),
            Variant("durable log", sys.executable, tuple(args.up_arg)),
        ]
    runs = []
    for round_ in range(args.rounds):
        for variant in variants:
            print(f"round {round_ + 1}: {variant.label} ({variant.python}): sending {spans} "
                  f"spans in {len(bodies)} requests ...", flush=True)  # fmt: skip
            chosen = mixes.get(variant.label, requests)
            runs.append(run_once(variant, chosen, spans, traces, args))
    report(runs, spans, traces, parse_us, decode_us)


if __name__ == "__main__":
    main()
