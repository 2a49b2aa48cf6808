"""CPU the store owner's loopback endpoint and the `/metrics` exporter spend per request,
against another checkout's in the same run (issue 42: each moved onto uvicorn only if it
costs at most 1.1x the CPU per request of the `http.server` it replaced).

Each variant's servers (`stack.store_endpoint.QueryServer` over a store that answers a
one-row result at once, and `stack.metrics.MetricsServer` rendering a box's counters per
scrape) run alone in a child process of its checkout's python: what is measured is the
server, from the socket to the answer, the token check, JSON and the text rendering
included. The parent sends `--requests` reads of `/sql` through the store room's own
client (`RemoteStore`: a connection per request, as the stack's processes and commands
reach it), then as many `GET /metrics` over keep-alive connections (as Prometheus
scrapes; a server that closes each connection is reconnected), from `--senders` threads.
The figure is the child's CPU seconds (all its threads) per request of each; the variants
alternate round by round, and the last lines are the ratios of the medians this / against.

    python bench/store_endpoint.py --against PYTHON [--requests 3000] [--senders 4]
                                   [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_cpu import alternate, answer_commands, child

CHILD_FLAG = "--serve-endpoints"
COUNTERS = {
    **{f"counter_{i}": i * 1000 for i in range(30)},
    "spill_bytes": 4096, "traces_held": 12, "stalled": {},
}  # fmt: skip
"""A box's counters as the exporter renders them per scrape (30 counters, 2 gauges)."""


def serve() -> None:
    """Child: this python's endpoint over a store that answers at once, and its metrics
    exporter; answer the parent's commands on stdin."""
    from pathgrade.schemas.store import QueryResult

    from pathgrade.stack.metrics import MetricsServer, labelled_samples, prometheus_text
    from pathgrade.stack.store_endpoint import QueryServer

    class AnswerAtOnce:
        def query(self, *args: Any, **kwargs: Any) -> QueryResult:
            return QueryResult(["AlertKey", "Count"], ["String", "UInt64"], [["a-key", 7]])

    endpoint = QueryServer(AnswerAtOnce())  # type: ignore[arg-type]
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    metrics = MetricsServer(
        "127.0.0.1", 0, lambda: prometheus_text(labelled_samples("collector", {}, COUNTERS))
    )
    metrics.start()
    answer_commands({
        "query_url": endpoint.url, "token": endpoint.token,
        "metrics_port": metrics.server_address[1],
    })  # fmt: skip
    metrics.stop()
    endpoint.shutdown()
    endpoint.server_close()


def from_threads(requests: int, senders: int, send: Callable[[], Callable[[], None]]) -> None:
    """`requests` calls in all from `senders` threads, each calling what `send()` made it."""
    counts = [requests // senders + (i < requests % senders) for i in range(senders)]

    def sender(count: int) -> None:
        one = send()
        for _ in range(count):
            one()

    threads = [threading.Thread(target=sender, args=(count,)) for count in counts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def reads(url: str, token: str) -> Callable[[], Callable[[], None]]:
    """A sender of `/sql` reads through `RemoteStore` (a connection each)."""
    from pathgrade.batch_plane.store.remote import RemoteStore

    def make() -> Callable[[], None]:
        store = RemoteStore(url, token)
        return lambda: store.query("SELECT AlertKey, count() FROM alerts GROUP BY AlertKey")

    return make


def scrapes(port: int) -> Callable[[], Callable[[], None]]:
    """A sender of `GET /metrics` on one keep-alive connection (reopened when closed)."""

    def make() -> Callable[[], None]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def scrape() -> None:
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            assert response.status == 200 and response.read()

        return scrape

    return make


class Run(NamedTuple):
    sql_us: float
    metrics_us: float


def run_once(python: str, requests: int, senders: int) -> Run:
    """The CPU per request of one child of `python`: `/sql` reads, then `/metrics` scrapes."""
    with child(python, __file__, CHILD_FLAG) as servers:
        announced = servers.announcement
        start = servers.cpu()
        from_threads(requests, senders, reads(announced["query_url"], announced["token"]))
        middle = servers.cpu()
        from_threads(requests, senders, scrapes(announced["metrics_port"]))
        end = servers.cpu()
    return Run((middle - start) / requests * 1e6, (end - middle) / requests * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", metavar="PYTHON", required=True,
                        help="the other checkout's python")  # fmt: skip
    parser.add_argument("--requests", type=int, default=3000, help="of each kind, per run")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant")
    args = parser.parse_args()

    runs = alternate(
        args.against, args.rounds, lambda python: run_once(python, args.requests, args.senders),
        lambda run: f"/sql {run.sql_us:7.1f} µs CPU per request, "
                    f"/metrics {run.metrics_us:7.1f}",
    )  # fmt: skip
    print(f"\n{args.requests} requests of each kind per run, {args.senders} senders")
    for server, field in (("endpoint /sql", "sql_us"), ("exporter /metrics", "metrics_us")):
        medians = {
            label: statistics.median(getattr(run, field) for run in values)
            for label, values in runs.items()
        }
        print(f"{server:<18} median µs CPU per request: this {medians['this']:7.1f}, "
              f"against {medians['against']:7.1f}; "
              f"this / against: {medians['this'] / medians['against']:.3f}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        serve()
    else:
        main()
