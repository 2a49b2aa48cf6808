"""Recovery without a restart, on the real stack (issue 38; issue 41's recovery paths):

- the data directory full at load (a size-limited tmpfs filled to ENOSPC, then emptied):
  requests are answered 503 while it lasts, the stall is named by the status, /metrics and
  the UI's banner, and once there is room everything acknowledged is stored by the same
  processes;
- the bundled broker SIGKILLed at load: a fresh one replaces it within seconds and the
  collector's durable log replays into it, losing nothing;
- past the restart cap (3 restarts in 5 minutes) the stack stops at once with exit code 1
  and its reason, and the next `pathgrade up` stores what it had acknowledged;
- the durable log at its bound while the store writer is stopped: 503 with Retry-After,
  and nothing lost once it goes on.

A full disk is made for real, so that test mounts a tmpfs: it needs root (CI runs as
root) and fails, saying so, without it rather than pass untested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.schemas.topics import REALTIME_GROUP, SPANS_TOPIC, STORE_GROUP

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import free_port
from pathgrade.stack.carry import committed_offsets
from pathgrade.stack.ownership import process_started
from pathgrade.stack.store_access import StatusUnavailable, stack_status
from tests.integration.conftest import PathgradeProcess, wait_until
from tests.integration.test_resilience import distinct_and_final
from tests.support.steady_load import SpanKey, SteadyLoad, demo_template, fresh_requests
from tests.support.topics import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

REQUESTS_PER_S = 10  # of about 100 spans each: about 1,000 spans/s
FULL_S = 20.0  # how long the disk stays full


def up(data_dir: Path, *extra: str) -> PathgradeProcess:
    return PathgradeProcess(
        ["up", "--data-dir", str(data_dir), "--grpc-port", str(free_port()),
         "--http-port", str(free_port()), "--status-every", "1", *extra],
        ready_text="pathgrade is up", data_dir=data_dir,
    )  # fmt: skip


def state(data_dir: Path) -> dict[str, Any]:
    return json.loads((data_dir / "stack.json").read_text())


def steady_load(data_dir: Path, seconds: float, seed: int) -> SteadyLoad:
    requests = fresh_requests(demo_template(), 100, int(seconds * REQUESTS_PER_S), seed)
    return SteadyLoad(state(data_dir)["http_port"], requests, 1 / REQUESTS_PER_S)


def stored(stack: PathgradeProcess, acknowledged: set[SpanKey]) -> bool:
    """Whether every acknowledged span is in `spans` FINAL (the stack stores only these)."""
    if stack.scalar("SELECT uniqExact(TraceId, SpanId) FROM spans") < len(acknowledged):
        return False
    return not missing(stack, acknowledged)


def missing(stack: PathgradeProcess, acknowledged: set[SpanKey]) -> set[SpanKey]:
    """The acknowledged spans not in `spans` FINAL."""
    rows = stack.sql("SELECT TraceId, SpanId FROM spans FINAL").rows
    return acknowledged - {(trace, span) for trace, span in rows}


def wait_until_stored(
    stack: PathgradeProcess,
    acknowledged: set[SpanKey],
    requests: Sequence[tuple[bytes, list[SpanKey]]] = (),
    timeout_s: float = 300,
) -> None:
    """Wait until every acknowledged span is stored; on timeout fail with what is missing
    (how many, of which traces and, given the `requests` sent, which of them), the stack's
    status and the end of its output, so a failure in CI tells its cause."""
    try:
        wait_until(lambda: stored(stack, acknowledged), timeout_s=timeout_s, interval_s=2)
    except AssertionError:
        lost = missing(stack, acknowledged)
        which = [index for index, (_, keys) in enumerate(requests) if lost.intersection(keys)]
        traces = {trace for trace, _ in lost}
        sample = sorted(traces)[:500]  # of the traces with spans missing
        listed = ",".join(f"'{trace}'" for trace in sample)
        in_sample = stack.scalar(f"SELECT count() FROM spans FINAL WHERE TraceId IN ({listed})")
        assert stack.data_dir is not None
        status = json.dumps(snapshot(stack.data_dir), indent=1, default=str)
        tail = "\n".join(stack.lines[-150:])
        raise AssertionError(
            f"{len(lost)} of {len(acknowledged)} acknowledged spans not stored after "
            f"{timeout_s} s ({len(traces)} traces, e.g. {sorted(lost)[:5]}); requests (by "
            f"index) with spans missing: {which}; spans stored: "
            f"{stack.scalar('SELECT count() FROM spans FINAL')}; of {len(sample)} of those "
            f"traces {in_sample} spans stored and "
            f"{sum(trace in set(sample) for trace, _ in acknowledged)} acknowledged (as "
            "many: stored under other ids)\n"
            f"{in_the_broker(stack.data_dir, lost)}\n"
            f"status: {status}\noutput (last 150 lines):\n{tail}"
        ) from None


def in_the_broker(data_dir: Path, lost: set[SpanKey]) -> str:
    """Where the `lost` spans are in the stack's broker (which messages of which partitions
    hold them), and what its reader groups committed: whether they never reached Kafka or
    a reader passed them."""
    bootstrap = state(data_dir)["kafka"]
    found: dict[int, list[int]] = {}
    held: set[SpanKey] = set()
    for message in read_topic(bootstrap, SPANS_TOPIC, quiet_s=5.0, first_within_s=30.0):
        keys = spans_of(message.value)
        if lost & keys:
            found.setdefault(message.partition, []).append(message.offset)
            held |= lost & keys
    groups = {
        group: committed_offsets(bootstrap, SPANS_TOPIC, group)
        for group in (STORE_GROUP, REALTIME_GROUP)
    }
    return (
        f"in the broker: {len(held)} of the {len(lost)} missing spans, in messages "
        f"(partition: offsets) {found}; committed offsets: {groups}"
    )


def spans_of(value: bytes) -> set[SpanKey]:
    """The (trace id, span id) of every span in a `pathgrade.spans` message."""
    traces = TracesData.FromString(value)
    return {
        (span.trace_id.hex(), span.span_id.hex())
        for resource in traces.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }


def snapshot(data_dir: Path) -> dict[str, Any] | None:
    try:
        return stack_status(data_dir)["snapshot"]
    except StatusUnavailable:
        return None


def stalls(data_dir: Path) -> dict[str, str]:
    """What the stack's status says is stalled now (what -> why)."""
    now = snapshot(data_dir) or {}
    processes = [now.get("collector"), now.get("store_writer"), *(now.get("realtime") or [])]
    return {what: why for counters in processes for what, why in (counters or {}).get(
        "stalled", {}).items()}  # fmt: skip


def page(url: str, token: str | None = None) -> str:
    """The page at `url`, with the owner's token when given (the loopback endpoint asks
    for it on every request)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
        return answer.read().decode()


def running(pid: int) -> bool:
    return process_started(pid) is not None


@contextmanager
def size_limited_tmpfs(directory: Path, size: str) -> Iterator[None]:
    """`directory` on a tmpfs of `size` (root only: fails saying so otherwise)."""
    if os.geteuid() != 0:
        pytest.fail(
            "this test fills a disk for real on a size-limited tmpfs, and mounting one needs "
            "root (as in CI): run the integration tests as root"
        )
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                   check=True)  # fmt: skip
    try:
        yield
    finally:
        subprocess.run(["umount", "--lazy", str(directory)], check=False)


class Ballast:
    """Files that fill the file system of `directory` to its last byte (ENOSPC) until
    `free()`."""

    def __init__(self, directory: Path) -> None:
        self.paths = [directory / "ballast-big", directory / "ballast-small"]

    def fill(self) -> None:
        for path, chunk in zip(self.paths, (1024 * 1024, 512), strict=True):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                while True:
                    os.write(descriptor, bytes(chunk))
            except OSError as exc:
                assert exc.errno == 28, exc  # ENOSPC: full
            finally:
                os.close(descriptor)

    def free(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)


def test_a_full_data_directory_at_load_stalls_visibly_and_heals_without_a_restart(
    tmp_path: Path,
) -> None:
    """Issue 38: the drainer died on ENOSPC, so once the disk had room nothing more was
    stored until a restart. Here the whole data directory (durable log, store, notes) is
    full for FULL_S at about 1,000 spans/s, with a backlog for the drainer to send while it
    is (the broker paused for the last 2 s before: as when the readers are behind), so it
    writes its notes while the disk refuses them. (The store's own merges and the log's
    trimming free a little space now and then, as on a real disk.)"""
    data_dir = tmp_path / "stack"
    with size_limited_tmpfs(data_dir, "512m"):
        stack = up(data_dir)
        try:
            pids = state(data_dir)["pids"]
            load = steady_load(data_dir, 40.0, seed=81)
            load.start()
            wait_until(lambda: load.elapsed() >= 8, timeout_s=60)
            ballast = Ballast(data_dir)
            os.kill(pids["broker"], signal.SIGSTOP)
            try:
                wait_until(lambda: load.elapsed() >= 10, timeout_s=60)
                ballast.fill()
            finally:
                os.kill(pids["broker"], signal.SIGCONT)
            try:
                full_at = load.elapsed()
                wait_until(lambda: "No space left" in stalls(data_dir).get("the durable log", ""))
                wait_until(lambda: "the store" in stalls(data_dir), timeout_s=90)
                stack_state = state(data_dir)
                ui, query = stack_state["ui_url"], stack_state["query_url"]
                banner = page(f"{ui}/health")
                assert 'id="stopped-banner"' in banner and "stalled: the durable log (" in banner
                assert 'pathgrade_collector_stalled{what="the durable log"} 1' in page(
                    f"{query}/metrics", stack_state["token"]
                )
                retried = load.retries
                wait_until(lambda: load.elapsed() >= full_at + FULL_S, timeout_s=120)
                assert load.retries > retried  # refused (503) while full, and sent again
            finally:
                ballast.free()
            load.join(timeout_s=600)
            assert load.rejected == 0 and len(load.acknowledged) > 30_000
            wait_until_stored(stack, load.acknowledged)
            wait_until(lambda: not stalls(data_dir), timeout_s=60)
            assert state(data_dir)["pids"] == pids  # the same processes healed
            assert not (snapshot(data_dir) or {}).get("restarts")
            assert 'id="stopped-banner"' not in page(f"{ui}/health")
        finally:
            code = stack.terminate()
        assert code == 0, stack.output


def test_a_killed_bundled_broker_is_replaced_at_load_and_nothing_is_lost(tmp_path: Path) -> None:
    """Issue 38: SIGKILL of the bundled broker went unnoticed for three minutes, then the
    stack stopped with exit code 0. Here a fresh broker (on a new port, in stack.json)
    replaces it and the collector's log replays into it: every acknowledged span is
    stored, evaluation goes on, and the status counts the restart."""
    stack = up(tmp_path)
    try:
        old = state(tmp_path)
        load = steady_load(tmp_path, 30.0, seed=82)
        load.start()
        wait_until(lambda: load.elapsed() >= 10, timeout_s=60)
        os.kill(old["pids"]["broker"], signal.SIGKILL)
        killed = time.monotonic()
        wait_until(lambda: stack.output_has("the bundled broker exited unexpectedly (code -9)"),
                   timeout_s=30)  # fmt: skip
        wait_until(lambda: stack.output_has("a fresh broker serves on"), timeout_s=120)
        print(f"replaced {time.monotonic() - killed:.1f} s after the kill")
        new = state(tmp_path)
        assert new["kafka"] != old["kafka"] and running(new["pids"]["broker"])
        assert new["pids"]["broker"] != old["pids"]["broker"]
        load.join(timeout_s=600)
        assert load.rejected == 0 and len(load.acknowledged) > 20_000
        wait_until_stored(stack, load.acknowledged)
        wait_until(lambda: (snapshot(tmp_path) or {}).get("restarts") == {"broker": 1})
        after = send_demo_traces(OTLPSpanExporter(endpoint=url(tmp_path)), traces=20, seed=83)
        ids = ",".join(f"'{t}'" for t in after.trace_ids)
        wait_until(lambda: distinct_and_final(stack, after.trace_ids) == (after.spans,) * 2)
        alerted = f"SELECT uniqExact(TraceId) FROM alerts WHERE TraceId IN ({ids})"
        wait_until(lambda: stack.scalar(alerted) > 0, timeout_s=90)  # evaluated on the new one
    finally:
        code = stack.terminate()
    assert code == 0, stack.output


def url(data_dir: Path) -> str:
    return f"http://127.0.0.1:{state(data_dir)['http_port']}/v1/traces"


def test_past_the_restart_cap_the_stack_stops_with_its_reason_and_a_restart_stores_all(
    tmp_path: Path,
) -> None:
    """Three collector restarts, then the broker dies: a fourth restart within 5 minutes is
    refused, so the stack stops at once (it cannot read up to anything with its broker
    gone) with exit code 1 and the reason; `pathgrade up` again replays the log."""
    stack = up(tmp_path)
    sent = [send_demo_traces(OTLPSpanExporter(endpoint=url(tmp_path)), traces=20, seed=84)]
    for _ in range(3):
        collector = state(tmp_path)["pids"]["collector"]
        os.kill(collector, signal.SIGKILL)
        wait_until(lambda c=collector: state(tmp_path)["pids"]["collector"] != c, timeout_s=90)
    exporter = OTLPSpanExporter(endpoint=url(tmp_path), timeout=30)
    sent.append(send_demo_traces(exporter, traces=20, seed=85))
    os.kill(state(tmp_path)["pids"]["broker"], signal.SIGKILL)
    try:
        code = stack.process.wait(timeout=60)
    finally:
        with suppress(subprocess.TimeoutExpired):
            stack.terminate()
    reason = "the bundled broker exited unexpectedly (code -9) and was restarted 3 times"
    assert code == 1, stack.output
    assert stack.output_has(f"{reason} in the last 5 min already; stopping"), stack.output
    assert stack.output_has(f"pathgrade: stopped: {reason}"), stack.output
    assert stack.output.count("process exited unexpectedly") == 3
    again = up(tmp_path)
    try:
        every = [trace_id for summary in sent for trace_id in summary.trace_ids]
        total = sum(summary.spans for summary in sent)
        wait_until(lambda: distinct_and_final(again, every) == (total, total), timeout_s=120)
    finally:
        assert again.terminate() == 0, again.output


def test_the_durable_log_at_its_bound_answers_503_while_the_store_writer_is_stopped(
    tmp_path: Path,
) -> None:
    """The store writer stopped (the main process, its owner, SIGSTOPped): the collector's
    log keeps what it has not committed, up to its bound, then answers 503 with
    Retry-After; once the writer goes on, the log is let go of, requests are accepted
    again and every acknowledged span is stored."""
    config = tmp_path / "collector.yaml"
    config.write_text("spill_max_bytes: 1000000\n")
    data_dir = tmp_path / "stack"
    stack = up(data_dir, "--config", str(config))
    requests = fresh_requests(demo_template(), 100, 300, seed=86)
    acknowledged: set[SpanKey] = set()
    refused: list[tuple[bytes, list[SpanKey]]] = []
    try:
        os.kill(stack.process.pid, signal.SIGSTOP)
        try:
            for body, keys in requests:
                status, headers, answer = post(url(data_dir), body)
                if status == 200:
                    acknowledged.update(keys)
                    continue
                assert status == 503, answer
                assert int(headers["Retry-After"]) > 0 and b"spill is full" in answer
                refused.append((body, keys))
                if len(refused) == 3:
                    break
        finally:
            os.kill(stack.process.pid, signal.SIGCONT)
        assert refused and acknowledged  # the bound was reached after some were accepted
        for body, keys in refused:  # sent again, as an exporter does after Retry-After
            wait_until(lambda b=body: post(url(data_dir), b)[0] == 200, timeout_s=120)
            acknowledged.update(keys)
        wait_until_stored(stack, acknowledged, requests)
    finally:
        code = stack.terminate()
    assert code == 0, stack.output


def post(address: str, body: bytes) -> tuple[int, Any, bytes]:
    """POST an OTLP/HTTP protobuf body: (status, headers, body)."""
    request = urllib.request.Request(
        address, data=body, headers={"Content-Type": "application/x-protobuf"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()
