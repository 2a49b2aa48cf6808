"""CPU per request of the OTLP/HTTP receiver's pooled server (collector/http_server.py)
against the standard library's ThreadingHTTPServer, with the same handler, in one run.

Each server runs in a child process of its own with a handler that reads the body its
Content-Length announces and answers 200; the parent posts the same body over keep-alive
connections from a few client threads. The figure is the server process's CPU seconds per
request (all its threads), the rounds alternate between the two servers, and the last
line is the ratio pooled / threading (below 1: the pooled server costs less).

    python bench/http_receiver.py [--requests 4000] [--body-kb 300] [--clients 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pathgrade.collector.http_server import PooledHTTPServer, PooledRequestHandler


def _answer(handler: BaseHTTPRequestHandler) -> None:
    handler.rfile.read(int(handler.headers["Content-Length"]))
    handler.send_response(200)
    handler.send_header("Content-Length", "2")
    handler.end_headers()
    handler.wfile.write(b"{}")


class _PooledHandler(PooledRequestHandler):
    def do_POST(self) -> None:
        _answer(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        _answer(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(kind: str, ports: Any, stop: Any, cpu: Any) -> None:
    """Child process: serve until `stop` is set, then report this process's CPU seconds."""
    server: Any
    if kind == "pooled":
        server = PooledHTTPServer(("127.0.0.1", 0), _PooledHandler)
    else:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _ThreadingHandler)
        server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started = time.process_time()
    ports.put(server.server_address[1])
    stop.wait()
    cpu.put(time.process_time() - started)
    server.shutdown()
    server.server_close()


def _client(port: int, body: bytes, requests: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/x-protobuf"}
    for _ in range(requests):
        connection.request("POST", "/v1/traces", body, headers)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
    connection.close()


def measure(kind: str, body: bytes, requests: int, clients: int) -> float:
    """Server CPU µs per request for `requests` posts of `body` from `clients` threads."""
    context = multiprocessing.get_context("spawn")
    ports, cpu, stop = context.Queue(), context.Queue(), context.Event()
    child = context.Process(target=_serve, args=(kind, ports, stop, cpu))
    child.start()
    port = ports.get(timeout=60)
    each = requests // clients
    senders = [threading.Thread(target=_client, args=(port, body, each)) for _ in range(clients)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    stop.set()
    seconds = cpu.get(timeout=60)
    child.join(timeout=60)
    return seconds / (each * clients) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--body-kb", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    body = bytes(range(256)) * (args.body_kb * 4)
    figures: dict[str, list[float]] = {"threading": [], "pooled": []}
    for round_number in range(1, args.rounds + 1):
        for kind in figures:
            figures[kind].append(measure(kind, body, args.requests, args.clients))
            print(f"round {round_number} {kind:<9} {figures[kind][-1]:8.1f} µs CPU/request")
    best = {kind: min(values) for kind, values in figures.items()}
    print(
        f"best: threading {best['threading']:.1f} µs, pooled {best['pooled']:.1f} µs per "
        f"request of {args.body_kb} KB; pooled / threading = "
        f"{best['pooled'] / best['threading']:.2f}"
    )


if __name__ == "__main__":
    main()
