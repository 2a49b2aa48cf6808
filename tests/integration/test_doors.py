"""Every door of a running stack, walked as a second tenant and as a local process without
the owner's token (issue 38): each answers with nothing of the other tenant and no file.

One `pathgrade up` (Tansu, chDB, the official OTLP exporter) with a tokens file holds two
tenants' traces; `acme`'s carry ACME_SERVICE. As tenant `globex` (its token, `--tenant
globex`) and as a process that never read `stack.json`, every read path is asked for acme's
rows, the host's files and the owner's token: the loopback endpoint (`/sql`, `/insert`,
`/status`, `/metrics`), `pathgrade sql`, `dataset from-traces --where`, `replay --where`,
`edge infer --where`, `alerts`, `review list`, the browser UI's pages (health and coverage
included, and its free-text filter), and the bundled broker, where a message with a forged
tenant header is refused and counted."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, set_span_in_context
from pathgrade.batch_plane.store.remote import TOKEN_HEADER
from pathgrade.schemas.alerts import ALERT_COLUMNS
from pathgrade.schemas.topics import MAC_HEADER, RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import listening_addresses
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.unit.realtime_plane.test_realtime_webhook import alert

pytestmark = pytest.mark.integration

ACME_SERVICE = "acme-secret-svc"
GLOBEX_SERVICE = "globex-svc"
TOKENS = {"acme": "tok-acme-5e1f", "globex": "tok-globex-77a0"}
MERGE = "TraceId IN (SELECT TraceId FROM merge(currentDatabase(), '^spans$'))"


class Stack:
    """The running stack, its two tenants' traces, and the ways in."""

    def __init__(self, process: PathgradeProcess, data_dir: Path, http_port: int) -> None:
        self.process = process
        self.data_dir = data_dir
        self.otlp = f"http://127.0.0.1:{http_port}/v1/traces"
        self.state: dict[str, Any] = json.loads((data_dir / "stack.json").read_text())
        self.acme_traces: list[str] = []

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    def leaks(self, text: str) -> list[str]:
        """What of acme's, of the host's files or of the owner's secrets `text` shows."""
        message_key = Path(self.state["message_key_file"]).read_text().strip()
        secrets = [ACME_SERVICE, self.state["token"], message_key, "root:"]
        return [s for s in [*secrets, *self.acme_traces] if s in text]


def send_gap_trace(url: str, token: str, service: str) -> str:
    """One trace of `service` whose tool call failed and that never called a model: an
    alert, and a coverage gap of its service (PG113 cannot decide without an answer)."""
    exporter = OTLPSpanExporter(endpoint=url, headers={"authorization": f"Bearer {token}"})
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(service)
    root = tracer.start_span(
        f"invoke_agent {service}",
        attributes={"gen_ai.operation.name": "invoke_agent", "pathgrade.turn.kind": "read"},
    )
    tool = tracer.start_span(
        "execute_tool lookup_order", set_span_in_context(root),
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"},
    )  # fmt: skip
    tool.set_status(Status(StatusCode.ERROR, "lookup failed"))
    tool.end()
    root.end()
    provider.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("doors")
    tokens = data_dir / "tokens.yaml"
    tokens.write_text("".join(f"{token}: {tenant}\n" for tenant, token in TOKENS.items()))
    process, _, http_port = start_stack(
        data_dir / "store", "--tokens-file", str(tokens), "--status-every", "1"
    )
    running = Stack(process, data_dir / "store", http_port)
    for tenant, service, seed in (("acme", ACME_SERVICE, 3), ("globex", GLOBEX_SERVICE, 4)):
        headers = {"authorization": f"Bearer {TOKENS[tenant]}"}
        demo = send_demo_traces(OTLPSpanExporter(endpoint=running.otlp, headers=headers),
                                traces=6, seed=seed)  # fmt: skip
        gaps = [send_gap_trace(running.otlp, TOKENS[tenant], service) for _ in range(2)]
        if tenant == "acme":
            running.acme_traces = [*demo.trace_ids, *gaps]
    wait_until(
        lambda: (
            process.scalar(f"SELECT count() FROM spans WHERE ServiceName = '{ACME_SERVICE}'")
            and process.scalar(f"SELECT count() FROM spans WHERE ServiceName = '{GLOBEX_SERVICE}'")
        ),
        timeout_s=90,
    )
    yield running
    assert process.terminate() == 0


def request(stack: Stack, path: str, body: Any = None, token: str | None = None) -> tuple[int, str]:
    """A raw HTTP request to the loopback endpoint, as any local process can send one."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers[TOKEN_HEADER] = token
    data = None if body is None else json.dumps(body).encode()
    sent = urllib.request.Request(stack.state["query_url"] + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(sent, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_endpoint_answers_no_local_process_without_the_owners_token(stack: Stack) -> None:
    stack_json = stack.data_dir / "stack.json"
    for private in (stack.data_dir, stack_json, Path(stack.state["message_key_file"])):
        assert private.stat().st_mode & 0o077 == 0, private  # the owner's user's only
    forged = alert("PG110").model_copy(update={"alert_key": "forged", "tenant": "acme"})
    doors = [
        ("/sql", {"sql": f"SELECT * FROM spans WHERE ServiceName = '{ACME_SERVICE}'"}),
        ("/sql", {"sql": "SELECT ServiceName FROM spans", "tenant": "acme"}),
        ("/sql", {"sql": f"SELECT file('{stack_json}')"}),
        ("/insert", {"table": "alerts", "columns": list(ALERT_COLUMNS), "rows": [forged.row()]}),
        ("/status", None),
        ("/metrics", None),
    ]
    for path, body in doors:
        for token in (None, "", TOKENS["acme"], stack.state["token"][:-2]):
            status, answer = request(stack, path, body, token)
            assert status == 403 and "needs the owner's token" in answer, (path, token)
            assert stack.leaks(answer) == [], (path, token)
    assert stack.process.scalar("SELECT count() FROM alerts WHERE AlertKey = 'forged'") == 0


def test_no_read_path_reaches_a_file_even_with_the_owners_token(stack: Stack) -> None:
    stack_json = stack.data_dir / "stack.json"
    for sql in (
        f"SELECT file('{stack_json}')",
        "SELECT file('/etc/passwd')",
        f"SELECT * FROM file('{stack_json}', 'LineAsString')",
        f"DESCRIBE file('{stack_json}', 'TSVWithNames')",
        f"SELECT * FROM url('file://{stack_json}', 'LineAsString')",
        "SELECT * FROM executable('cat /etc/passwd', 'LineAsString', 'x String')",
    ):
        status, answer = request(stack, "/sql", {"sql": sql}, stack.state["token"])
        assert status == 400 and "is not allowed" in answer, sql
        assert stack.leaks(answer) == [], sql
        command = stack.cli("sql", sql)
        assert command.returncode == 1 and "is not allowed" in command.stderr, sql
        assert stack.leaks(command.stdout + command.stderr) == [], sql


def test_a_second_tenants_commands_read_nothing_of_the_first(stack: Stack) -> None:
    own = stack.cli("sql", "--tenant", "globex", "--format", "json",
                    "SELECT DISTINCT Tenant, ServiceName FROM spans ORDER BY 2")  # fmt: skip
    assert own.returncode == 0, own.stderr
    rows = [json.loads(line) for line in own.stdout.splitlines()]
    assert {row["Tenant"] for row in rows} == {"globex"}
    assert GLOBEX_SERVICE in {row["ServiceName"] for row in rows}
    for sql in (
        f"SELECT count() FROM spans WHERE {MERGE}",
        "SELECT * FROM merge(currentDatabase(), '^alerts$')",
        "SELECT sum(rows) FROM system.parts WHERE table = 'spans'",
        "SELECT total_rows FROM system.tables",
        "SELECT * FROM information_schema.tables",
        "SELECT * FROM judge_cache",
        f"SELECT file('{stack.data_dir / 'stack.json'}')",
        "SHOW TABLES",
    ):
        refused = stack.cli("sql", "--tenant", "globex", sql)
        assert refused.returncode == 1 and "store:" in refused.stderr, sql
        assert stack.leaks(refused.stdout + refused.stderr) == [], sql
    where_commands = [
        ("dataset", "from-traces", "stolen", "--tenant", "globex", "--where", MERGE),
        ("replay", "--tenant", "globex", "--where", MERGE),
        ("edge", "infer", "--tenant", "globex", "--where", MERGE, "--out", "/dev/null"),
    ]
    for command in where_commands:
        refused = stack.cli(*command)
        assert refused.returncode != 0 and "merge() is not allowed" in refused.stderr, command
        assert stack.leaks(refused.stdout + refused.stderr) == [], command
    by_name = stack.cli("dataset", "from-traces", "stolen", "--tenant", "globex",
                        "--where", f"ServiceName = '{ACME_SERVICE}'")  # fmt: skip
    assert by_name.returncode == 1 and "no stored trace matches" in by_name.stderr
    for command in (("alerts", "--since", "1d", "--tenant", "globex"),
                    ("review", "list", "--tenant", "globex", "--format", "json")):  # fmt: skip
        listed = stack.cli(*command)
        assert listed.returncode == 0, listed.stderr
        assert "globex" in listed.stdout or GLOBEX_SERVICE in listed.stdout, command
        assert stack.leaks(listed.stdout) == [], command


def ui_page(stack: Stack, path: str) -> tuple[int, str]:
    """The status and text of a browser UI page as tenant globex's viewer."""
    headers = {"Authorization": f"Bearer {TOKENS['globex']}"}
    sent = urllib.request.Request(stack.state["ui_url"] + path, headers=headers)
    try:
        with urllib.request.urlopen(sent, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_second_tenants_pages_show_nothing_of_the_first(stack: Stack) -> None:
    def both_gaps() -> bool:  # the operator's status lists both tenants' coverage gaps
        status = stack.cli("status").stdout
        return ACME_SERVICE in status and GLOBEX_SERVICE in status

    wait_until(both_gaps, timeout_s=90)
    _, health = ui_page(stack, "/health")
    assert GLOBEX_SERVICE in health  # the viewer's own gap
    assert stack.leaks(health) == [] and "accepted_spans" not in health
    injected = urllib.parse.quote("' OR 1=1 OR Tenant = 'acme")
    for path in ("/traces?from=1d", "/alerts?from=1d", "/review", "/runs", "/datasets",
                 "/edge", f"/traces?from=1d&q={injected}"):  # fmt: skip
        status, page = ui_page(stack, path)
        assert status == 200 and stack.leaks(page) == [], path
    _, filtered = ui_page(stack, f"/traces?from=1d&service={ACME_SERVICE}")  # echoes the name
    assert [trace for trace in stack.acme_traces if trace in filtered] == []
    for trace_id in stack.acme_traces[:3]:  # the page names the id it was asked for
        status, page = ui_page(stack, f"/trace/{trace_id}")
        assert status == 404 and ACME_SERVICE not in page, trace_id
    assert GLOBEX_SERVICE in ui_page(stack, "/traces?from=1d")[1]  # the viewer's own rows


def test_a_forged_message_on_the_bundled_broker_is_refused_and_counted(stack: Stack) -> None:
    """A local process finds the broker's loopback port and produces a span message for
    tenant acme without the stack's MAC (and one with a made-up MAC): neither is stored,
    both are counted; the collector's own messages still are."""
    bootstrap = stack.state["kafka"]
    port = int(bootstrap.rsplit(":", 1)[1])
    assert listening_addresses(port) == {"127.0.0.1"}  # loopback only
    trace_id = "f0" * 16
    value = traces_data(trace_id)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    headers = [(TENANT_HEADER, b"acme"), (RECEIVED_AT_HEADER, b"1700000000000000000")]
    for forged in (headers, [*headers, (MAC_HEADER, b"\x00" * 32)]):
        producer.send(SPANS_TOPIC, value=value, key=trace_id.encode(), headers=forged).get(30)
    producer.close()
    gap = send_gap_trace(stack.otlp, TOKENS["acme"], ACME_SERVICE)  # after the forged ones

    def counted() -> dict[str, Any] | None:
        snapshot = json.loads(stack.cli("status", "--format", "json").stdout)["snapshot"]
        refused = (
            snapshot["store_writer"].get("forged_messages", 0),
            sum(w.get("forged_messages", 0) for w in snapshot["realtime"] if w),
        )
        return snapshot if refused == (2, 2) else None

    wait_until(counted, timeout_s=90)
    wait_until(lambda: stack.process.scalar(f"SELECT count() FROM spans WHERE TraceId = '{gap}'"))
    assert stack.process.scalar(f"SELECT count() FROM spans WHERE TraceId = '{trace_id}'") == 0
    metrics = stack.process.owner().get("/metrics").decode()
    assert "pathgrade_store_writer_forged_messages_total 2" in metrics
    assert 'pathgrade_realtime_forged_messages_total{worker="1"} 2' in metrics
    wait_until(lambda: stack.process.output_has("forged messages refused: store writer 2"))


def traces_data(trace_id: str) -> bytes:
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    data = TracesData()
    resource = data.resource_spans.add()
    service = resource.resource.attributes.add()
    service.key, service.value.string_value = "service.name", ACME_SERVICE
    span = resource.scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes.fromhex(trace_id), b"\x01" * 8
    span.name, span.start_time_unix_nano, span.end_time_unix_nano = "invoke_agent forged", 1, 2
    return data.SerializeToString()
