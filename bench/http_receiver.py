"""CPU the OTLP/HTTP receiver spends per request and per span, against another checkout's
receiver in the same run (issue 42: the receiver moved onto uvicorn only if it costs at
most 1.1x the CPU per request of the hand-written server it replaced).

Each variant's receiver (`collector.http_receiver.OtlpHttpServer` of its checkout's
python) runs alone in a child process, with a pipeline that accepts every span at once
(no redaction, no Kafka): what is measured is the receiver, from the socket to the
answer, protobuf parse included. The parent posts bench/ingest.py's realistic request
bodies (`--batch` spans each: 512 is what the OpenTelemetry SDK's batch processor sends)
over keep-alive connections from a few threads. The figure is the child's CPU seconds
(all its threads) per request and per span; the variants alternate round by round, and
the last line is the ratio of the medians this / against.

    python bench/http_receiver.py --against PYTHON [--spans 40000] [--batch 512]
                                  [--senders 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_cpu import alternate, answer_commands, child

CHILD_FLAG = "--serve-receiver"


def serve() -> None:
    """Child: run this python's receiver with a pipeline that accepts every span; answer
    the parent's commands on stdin ("cpu": this process's CPU seconds; "stop")."""
    from pathgrade.collector.http_receiver import OtlpHttpServer
    from pathgrade.collector.pipeline import IngestResult
    from pathgrade.transport.bearer_tokens import TokenAuth

    class AcceptEverything:
        def ingest(self, request: Any, tenant: str, *args: Any, **kwargs: Any) -> IngestResult:
            spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            return IngestResult(spans, 0, "")

    server = OtlpHttpServer(
        ("127.0.0.1", 0), AcceptEverything(), TokenAuth.from_file(None),  # type: ignore[arg-type]
        64 * 1024 * 1024,
    )  # fmt: skip
    threading.Thread(target=server.serve_forever, daemon=True).start()
    answer_commands({"http_port": server.server_address[1]})
    server.shutdown()
    server.server_close()


class Run(NamedTuple):
    per_request_us: float
    per_span_us: float


def run_once(python: str, bodies: list[bytes], spans: int, senders: int) -> Run:
    """The CPU of one receiver child of `python` for posting every body once."""
    from ingest import send_traces

    with child(python, __file__, CHILD_FLAG) as receiver:
        before = receiver.cpu()
        send_traces(receiver.announcement["http_port"], bodies, senders)
        seconds = receiver.cpu() - before
    return Run(seconds / len(bodies) * 1e6, seconds / spans * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", metavar="PYTHON", required=True,
                        help="the other checkout's python")  # fmt: skip
    parser.add_argument("--spans", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=512, help="spans per request")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant")
    args = parser.parse_args()

    from ingest import realistic_bodies, span_count

    bodies = realistic_bodies(args.spans, args.batch)
    spans = span_count(bodies)
    size = sum(map(len, bodies)) // len(bodies)
    runs = alternate(
        args.against, args.rounds, lambda python: run_once(python, bodies, spans, args.senders),
        lambda run: f"{run.per_request_us:8.1f} µs CPU per request, "
                    f"{run.per_span_us:5.2f} per span",
    )  # fmt: skip
    print(f"\n{len(bodies)} requests of {args.batch} spans ({size} bytes on average), "
          f"{spans} spans, {args.senders} senders")  # fmt: skip
    medians = {}
    for label, values in runs.items():
        medians[label] = statistics.median(run.per_request_us for run in values)
        per_span = statistics.median(run.per_span_us for run in values)
        print(f"receiver {label:<8} median {medians[label]:8.1f} µs CPU per request, "
              f"{per_span:5.2f} per span")  # fmt: skip
    print(f"this / against: {medians['this'] / medians['against']:.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        serve()
    else:
        main()
