"""A real OTLP/HTTP logs receiver for tests: it decodes each `POST /v1/logs` body (gzip or
not) with the official `opentelemetry-proto` `ExportLogsServiceRequest` and keeps every
record it acknowledged. It is the receiving end pathgrade exports to, not a stand-in for
a part of pathgrade: it can be taken down (its port then refuses connections) and brought
back on the same port, made to answer 503 for a while, to want a header, or to refuse
(400) any request holding one of some record ids."""

from __future__ import annotations

import gzip
import socket
import threading
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from pathgrade.content.otlp import any_value, attributes_dict


@dataclass(frozen=True)
class ReceivedRecord:
    """One log record as it arrived, with its resource's attributes and scope."""

    event_name: str
    trace_id: str
    span_id: str
    time_ns: int
    severity_number: int
    severity_text: str
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope_name: str
    schema_url: str


class LogsReceiver:
    """`url` takes OTLP/HTTP protobuf logs; `records` holds what it acknowledged, `bodies`
    the size of each acknowledged request's body (uncompressed), `batches` its records,
    `requests` how many requests it answered."""

    def __init__(self, required_headers: dict[str, str] | None = None) -> None:
        self.required_headers = {k.lower(): v for k, v in (required_headers or {}).items()}
        self.records: list[ReceivedRecord] = []
        self.bodies: list[int] = []
        self.batches: list[int] = []
        self.requests = 0
        self.answer_status: int | None = None  # answer every request with this status
        self.refuse_ids: set[str] = set()  # 400 for a request holding a record with one
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/logs"

    def up(self) -> None:
        """Listen (again) on the same port."""
        receiver = self

        class Handler(_Handler):
            owner = receiver

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        """Stop listening and close every open connection: connections to the port are
        refused until `up()`."""
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            open_connections, self.connections = list(self.connections), set()
        for connection in open_connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def ids(self, attribute: str) -> list[str]:
        """The value of `attribute` of every record received, in arrival order."""
        with self.lock:
            return [r.attributes[attribute] for r in self.records if attribute in r.attributes]

    def take(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Status and answer body for one request."""
        with self.lock:
            self.requests += 1
        for name, value in self.required_headers.items():
            if headers.get(name) != value:
                return 401, b"missing or wrong " + name.encode()
        if self.answer_status is not None:
            return self.answer_status, b"unavailable"
        raw = gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body
        request = ExportLogsServiceRequest()
        try:
            request.ParseFromString(raw)
        except Exception:
            return 400, b"not an ExportLogsServiceRequest"
        records = list(_records(request))
        if any(set(r.attributes.values()) & self.refuse_ids for r in records):
            return 400, b"refused"
        with self.lock:
            self.records.extend(records)
            self.bodies.append(len(raw))
            self.batches.append(len(records))
        return 200, ExportLogsServiceResponse().SerializeToString()


def _records(request: ExportLogsServiceRequest) -> list[ReceivedRecord]:
    found = []
    for resource_logs in request.resource_logs:
        resource = attributes_dict(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                found.append(
                    ReceivedRecord(
                        event_name=record.event_name,
                        trace_id=record.trace_id.hex(),
                        span_id=record.span_id.hex(),
                        time_ns=record.time_unix_nano,
                        severity_number=record.severity_number,
                        severity_text=record.severity_text,
                        body=any_value(record.body) if record.HasField("body") else None,
                        attributes=attributes_dict(record.attributes),
                        resource=resource,
                        scope_name=scope_logs.scope.name,
                        schema_url=scope_logs.schema_url,
                    )
                )
    return found


class _Handler(BaseHTTPRequestHandler):
    owner: LogsReceiver
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.owner.lock:
            self.owner.connections.add(self.connection)

    def finish(self) -> None:
        with self.owner.lock:
            self.owner.connections.discard(self.connection)
        super().finish()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        if self.path != "/v1/logs":
            status, answer = 404, b"not found"
        else:
            status, answer = self.owner.take(body, headers)
        self.send_response(status)
        kind = "application/x-protobuf" if status == 200 else "text/plain"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: Any) -> None:
        pass
