"""Client CPU per alert POST: pathgrade's webhook client against the standard library's.

Starts a minimal keep-alive HTTP/1.1 receiver in another process (so its work is not
counted), then POSTs the same alert-sized JSON body over one kept-alive connection with
`http.client` (the baseline: what the webhook used before) and with
`realtime_plane.webhook_http.WebhookConnection` (through `post_once`, as the sink does),
alternating rounds, and prints CPU µs per POST of each and the ratio.

    python bench/webhook.py [--posts 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import subprocess
import sys
import time
from collections.abc import Callable

from pathgrade.realtime_plane.sinks import post_once
from pathgrade.realtime_plane.webhook_http import WebhookConnection

from pathgrade.stack.broker import free_port

RECEIVER = r"""
import socket, sys, threading

def serve(conn):
    reader = conn.makefile("rb")
    while True:
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not line:
            return
        reader.read(length)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")

listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
BODY = b'{"schema_version":1,"code":"PG110","reason":"' + b"x" * 600 + b'"}'


def cpu_per_post_us(post: Callable[[], None], posts: int) -> float:
    started = time.process_time()
    for _ in range(posts):
        post()
    return (time.process_time() - started) / posts * 1e6


def stdlib_poster(port: int) -> Callable[[], None]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def post() -> None:
        connection.request("POST", "/hook", BODY, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        assert response.status == 200

    return post


def pathgrade_poster(port: int) -> Callable[[], None]:
    connection = WebhookConnection(f"http://127.0.0.1:{port}/hook", 5.0)

    def post() -> None:
        assert post_once(connection, BODY) == (False, None)

    return post


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--posts", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)])
    try:
        time.sleep(0.5)
        posters = {"http.client": stdlib_poster(port), "pathgrade": pathgrade_poster(port)}
        for post in posters.values():
            cpu_per_post_us(post, 200)  # warm-up: connections open, code paths hot
        totals = dict.fromkeys(posters, 0.0)
        for _ in range(args.rounds):
            for name, post in posters.items():
                totals[name] += cpu_per_post_us(post, args.posts) / args.rounds
    finally:
        receiver.kill()
    for name, us in totals.items():
        print(f"{name:<12} {us:7.1f} µs CPU per POST")
    print(f"ratio pathgrade / http.client  {totals['pathgrade'] / totals['http.client']:.2f}")


if __name__ == "__main__":
    main()
