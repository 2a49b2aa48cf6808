"""Nothing acknowledged is lost: broker outages, a killed store writer, a stopped stack."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.schemas.topics import SAMPLED_TOPIC, SCORER_GROUP

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker
from pathgrade.stack.embedded import BROKER_SWAP_MIN_INTERVAL_S
from pathgrade.stack.store_access import stack_status
from tests.integration.conftest import (
    PathgradeProcess,
    spill_on_disk,
    start_collector,
    start_stack,
    wait_until,
)
from tests.support.topics import read_topic

pytestmark = pytest.mark.integration


def distinct_and_final(process: PathgradeProcess, trace_ids: list[str]) -> tuple[int, int]:
    ids = ",".join(f"'{t}'" for t in trace_ids)
    row = process.sql(
        f"SELECT count(), uniqExact(TraceId, SpanId) FROM spans FINAL WHERE TraceId IN ({ids})"
    ).rows[0]
    return row[0], row[1]


def test_broker_outage_spills_then_drains_without_loss_or_duplicates(
    broker: LocalBroker, tmp_path: Path
) -> None:
    config = tmp_path / "collector.yaml"
    config.write_text("ack_timeout_s: 1.0\n")
    stack, _, http_port = start_stack(
        tmp_path / "store", "--kafka", broker.bootstrap, "--config", str(config)
    )
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    try:
        before = send_demo_traces(OTLPSpanExporter(endpoint=url), traces=20, seed=1)
        wait_until(lambda: distinct_and_final(stack, before.trace_ids) == (before.spans,) * 2)

        assert broker.process is not None
        os.kill(broker.process.pid, signal.SIGSTOP)  # the broker stops answering
        try:
            during = send_demo_traces(OTLPSpanExporter(endpoint=url, timeout=60), traces=20, seed=2)
            spill = tmp_path / "store" / "spill"
            assert spill_on_disk(spill) > 0  # acknowledged from the fsynced spill
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)

        after = send_demo_traces(OTLPSpanExporter(endpoint=url), traces=20, seed=3)
        every = before.trace_ids + during.trace_ids + after.trace_ids
        total = before.spans + during.spans + after.spans
        wait_until(lambda: distinct_and_final(stack, every) == (total, total), timeout_s=120)
        wait_until(lambda: spill_on_disk(spill) == 0, timeout_s=30)
    finally:
        assert stack.terminate() == 0, stack.output


def test_store_writer_killed_mid_stream_and_restarted_loses_nothing(
    broker: LocalBroker, tmp_path: Path
) -> None:
    collector, _, http_port = start_collector(broker.bootstrap, tmp_path / "spill")
    store = tmp_path / "store"
    writer_args = ["store-writer", "--kafka", broker.bootstrap, "--data-dir", str(store)]
    writer = PathgradeProcess(writer_args, ready_text="store writer:", data_dir=store)
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    sent: list = []
    sender = threading.Thread(
        target=lambda: sent.append(
            send_demo_traces(OTLPSpanExporter(endpoint=url), traces=600, seed=9, rate_per_s=100)
        )
    )
    try:
        sender.start()
        wait_until(lambda: writer.scalar("SELECT count() FROM spans") > 200, timeout_s=60)
        writer.kill()  # SIGKILL: no flush, no commit
        writer = PathgradeProcess(writer_args, ready_text="store writer:", data_dir=store)
        sender.join(timeout=120)
        summary = sent[0]
        wait_until(
            lambda: distinct_and_final(writer, summary.trace_ids) == (summary.spans,) * 2,
            timeout_s=120,
        )
    finally:
        assert writer.terminate() == 0, writer.output
        assert collector.terminate() == 0, collector.output


@pytest.mark.parametrize("stop", ["sigterm", "ctrl-c"])
def test_up_demo_stopped_then_sql_finds_the_demo_spans(tmp_path: Path, stop: str) -> None:
    stack, _, _ = start_stack(tmp_path, "--demo", "--no-demo-pages")  # the live traffic alone
    wait_until(lambda: stack.scalar("SELECT count() FROM spans") > 0, timeout_s=60)
    # Ctrl-C reaches every process of the terminal's group, the broker's included.
    code = stack.terminate() if stop == "sigterm" else stack.interrupt()
    assert code == 0, stack.output
    sent = re.search(r"demo sent (\d+) traces \((\d+) spans\)", stack.output)
    assert sent, stack.output
    result = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "sql", "--data-dir", str(tmp_path),
         "--format", "json", "SELECT count() AS n, uniqExact(TraceId) AS t FROM spans FINAL"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f'{{"n": {sent[2]}, "t": {sent[1]}}}'
    # Its last line says what every process did: all the demo's spans in and stored.
    final = stack.output.strip().splitlines()[-1]
    spans = f"{int(sent[2]):,}"
    assert final.startswith(f"stopped: in {spans} spans | stored {spans} | evaluated "), final


def test_full_spill_answers_503_retry_after_and_grpc_unavailable(
    broker: LocalBroker, tmp_path: Path
) -> None:
    import urllib.error
    import urllib.request

    import grpc
    from google.rpc import status_pb2

    from tests.integration.test_ingest import EXPORT_METHOD, mixed_request, post

    config = tmp_path / "collector.yaml"
    config.write_text("ack_timeout_s: 0.5\nspill_max_bytes: 2000\n")
    collector, grpc_port, http_port = start_collector(
        broker.bootstrap, tmp_path / "spill", "--config", str(config)
    )
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    body = mixed_request(bytes.fromhex("ab" * 16)).SerializeToString()
    assert broker.process is not None
    os.kill(broker.process.pid, signal.SIGSTOP)
    try:
        statuses = [post(url, body, "application/x-protobuf") for _ in range(40)]
        codes = [code for code, _ in statuses]
        assert 200 in codes and 503 in codes  # spilled until the bound, then refused
        refused = status_pb2.Status.FromString(statuses[codes.index(503)][1])
        assert "spill is full" in refused.message
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        with pytest.raises(urllib.error.HTTPError) as http_error:
            urllib.request.urlopen(request, timeout=30)
        assert http_error.value.code == 503
        assert int(http_error.value.headers["Retry-After"]) > 0
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            export = channel.unary_unary(EXPORT_METHOD)
            with pytest.raises(grpc.RpcError) as error:
                export(body, timeout=30)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        details = dict(error.value.trailing_metadata() or ())
        assert "grpc-status-details-bin" in details  # google.rpc.RetryInfo for the client
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
        assert collector.terminate() == 0, collector.output


@pytest.mark.timeout(900)  # a loaded machine sends the 3,000 traces slowly
def test_bundled_broker_swapped_when_too_big_loses_nothing(tmp_path: Path) -> None:
    """Past --broker-max-mb the memory-only broker is replaced while traffic flows: every
    span is stored once, and the realtime plane (two processes in the group, which split
    the partitions) evaluated traces from both sides. The status counts every span across
    the swap; `stack.json` names the fresh broker."""
    stack, _, http_port = start_stack(
        tmp_path, "--broker-max-mb", "24", "--capture-tools", "*", "--realtime-workers", "2",
        "--status-every", "1",
    )  # fmt: skip
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    state = json.loads((tmp_path / "stack.json").read_text())
    bootstrap = state["kafka"]
    assert {"realtime-1", "realtime-2"} <= state["pids"].keys()
    scorer_has_read_nothing(bootstrap)
    sent: list = []
    try:
        first = threading.Thread(
            target=lambda: sent.append(
                send_demo_traces(OTLPSpanExporter(endpoint=url, timeout=60), traces=3000, seed=4)
            )
        )
        first.start()
        wait_for_the_swap(stack, first)
        first.join(timeout=180)
        sent.append(send_demo_traces(OTLPSpanExporter(endpoint=url), traces=200, seed=5))
        every = [trace_id for summary in sent for trace_id in summary.trace_ids]
        total = sum(summary.spans for summary in sent)
        wait_until(lambda: distinct_and_final(stack, every) == (total, total), timeout_s=180)
        try:
            wait_until(lambda: all_counted(counted_across_the_swap(tmp_path), total), timeout_s=60)
        except AssertionError:
            counts = counted_across_the_swap(tmp_path)
            said = f"status (accepted, stored, realtime up) {counts}, sent {total}"
            raise AssertionError(said) from None
        for summary in sent:
            ids = ",".join(f"'{t}'" for t in summary.trace_ids)
            alerted = f"SELECT uniqExact(TraceId) FROM alerts WHERE TraceId IN ({ids})"
            wait_until(lambda q=alerted: stack.scalar(q) > 0, timeout_s=60)
        now = json.loads((tmp_path / "stack.json").read_text())
        assert now["kafka"] != bootstrap  # the fresh broker serves on a port of its own
        assert now["pids"]["broker"] != state["pids"]["broker"]
        with pytest.raises(ProcessLookupError):  # the old one stopped once it was read
            os.kill(state["pids"]["broker"], 0)
        samples_now = sampled_count(now["kafka"])
    finally:
        assert stack.terminate() == 0, stack.output
    swapped = re.search(
        r"broker swapped .*\(([\d.]+) MB -> ([\d.]+) MB resident\).* \((\d+) samples",
        stack.output,
    )
    assert swapped, stack.output
    before, carried = float(swapped[1]), int(swapped[3])
    assert before >= 24  # past the limit (printed to 0.1 MB); the fresh one took traffic at once
    assert 0 < carried <= samples_now  # the unscored samples came along


def wait_for_the_swap(stack: PathgradeProcess, sending: threading.Thread) -> None:
    """Wait for "broker swapped" while the traffic is sent (a loaded machine sends slowly)
    and for two swap intervals after it (a swap whose readers did not settle is tried
    again); fail with what the stack said of its broker (memory in its status lines,
    swaps abandoned)."""

    def swapped() -> bool:
        return stack.output_has("broker swapped")

    wait_until(lambda: swapped() or not sending.is_alive(), timeout_s=600)
    try:
        wait_until(swapped, timeout_s=2 * BROKER_SWAP_MIN_INTERVAL_S + 30)
    except AssertionError:
        said = [line for line in stack.output.splitlines() if "broker" in line]
        raise AssertionError("no broker swap; the stack said:\n" + "\n".join(said[-40:])) from None


def counted_across_the_swap(data_dir: Path) -> tuple[int, int, bool]:
    """What `pathgrade status` counts across the swap: spans the collector accepted, spans
    the store writers stored, and whether both realtime processes answer."""
    snapshot = stack_status(data_dir)["snapshot"]
    return (
        snapshot["collector"]["accepted_spans"],
        snapshot["store_writer"]["spans"],
        all(worker is not None for worker in snapshot["realtime"]),
    )


def all_counted(counts: tuple[int, int, bool], total: int) -> bool:
    """Every sent span accepted once, at least that many stored, both realtime processes up."""
    accepted, stored, realtime_up = counts
    return accepted == total and stored >= total and realtime_up


def scorer_has_read_nothing(bootstrap: str) -> None:
    """Commit offset 0 on every partition of pathgrade.sampled for the scorer group: a
    scorer that is behind, so everything sampled before the swap is unread."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=SCORER_GROUP)
    partitions = consumer.partitions_for_topic(SAMPLED_TOPIC) or set()
    consumer.commit(
        {TopicPartition(SAMPLED_TOPIC, p): OffsetAndMetadata(0, "", -1) for p in partitions}
    )
    consumer.close(autocommit=False)


def sampled_count(bootstrap: str) -> int:
    """How many messages pathgrade.sampled holds (read from the start)."""
    return len(read_topic(bootstrap, SAMPLED_TOPIC))


def test_dead_collector_and_realtime_processes_are_restarted(tmp_path: Path) -> None:
    """A SIGKILLed realtime process and a SIGTERMed collector (children never ignore it)
    come back (the collector on the same port) and nothing the collector acknowledged is
    lost; the realtime plane alerts on traffic after its restart; the final line counts
    what every collector process accepted."""
    stack, _, http_port = start_stack(tmp_path, "--capture-tools", "*")
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    try:
        sent = [send_demo_traces(OTLPSpanExporter(endpoint=url), traces=20, seed=11)]
        for name, sig in (("realtime", signal.SIGKILL), ("collector", signal.SIGTERM)):
            pid = json.loads((tmp_path / "stack.json").read_text())["pids"][name]
            os.kill(pid, sig)
            wait_until(lambda n=name: stack.output_has(f"the {n} process exited"), timeout_s=30)
            wait_until(lambda p=pid, n=name: _pid_of(tmp_path, n) not in (None, p), timeout_s=90)
        sent.append(send_demo_traces(OTLPSpanExporter(endpoint=url), traces=20, seed=12))
        every = [trace_id for summary in sent for trace_id in summary.trace_ids]
        total = sum(summary.spans for summary in sent)
        wait_until(lambda: distinct_and_final(stack, every) == (total, total), timeout_s=120)
        ids = ",".join(f"'{t}'" for t in sent[1].trace_ids)
        alerted = f"SELECT uniqExact(TraceId) FROM alerts WHERE TraceId IN ({ids})"
        wait_until(lambda: stack.scalar(alerted) > 0, timeout_s=90)
    finally:
        assert stack.terminate() == 0, stack.output
    assert stack.output.count("restarting it") == 2, stack.output
    assert stack.output_has("the collector process exited unexpectedly (code -15)")
    final = stack.lines[-1]
    assert final.startswith(f"stopped: in {total:,} spans | stored {total:,} | "), final
    evaluated = int(re.search(r"evaluated ([\d,]+) traces", final)[1].replace(",", ""))
    assert evaluated >= 40  # both realtime processes' evaluations


def _pid_of(data_dir: Path, name: str) -> int | None:
    try:
        return json.loads((data_dir / "stack.json").read_text())["pids"][name]
    except (OSError, ValueError, KeyError):
        return None
