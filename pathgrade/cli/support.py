"""Pieces the `pathgrade` subcommand modules share: the user-facing error, the store
arguments and the store itself, the realtime plane's settings file, the alert log format
and the tracer provider of in-process agents."""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from pathgrade.schemas.store import Store

DEFAULT_DATA_DIR = Path("pathgrade-data")


def quiet_stdout() -> None:
    """The reader of stdout went away (`| head`): send whatever is still printed to
    /dev/null, so neither this nor the flush at exit raises BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def print_line(text: str) -> None:
    """Print and flush a line of a long-running command; a closed stdout silences it
    (`quiet_stdout`) instead of stopping the command."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        quiet_stdout()


class CliError(Exception):
    """A message for the user, and the exit code (2: bad usage or configuration)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


CLICKHOUSE_ENV = "PATHGRADE_CLICKHOUSE"
LOG_LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""Every command's log lines (and the JSON alert lines of `--log-format json`)."""


_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_timestamp(text: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """A UTC datetime from a duration back from now (`15m`) or an ISO timestamp."""
    now = now or datetime.datetime.now(datetime.UTC)
    match = _DURATION.match(text)
    if match:
        return now - datetime.timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        message = f"--since: expected a duration like 15m/2h/1d or an ISO time, got {text!r}"
        raise CliError(message) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def since_ns(text: str | None) -> int | None:
    """`--since` as Unix nanoseconds (`since_timestamp`), None without it."""
    return int(since_timestamp(text).timestamp() * 1e9) if text else None


FACTS_KEY_ENV = "PATHGRADE_FACTS_KEY_FILE"


def fact_secret(args: argparse.Namespace) -> Any:
    """The deployment's fact secret for offline scoring (`content.fingerprints.FactSecret`):
    `--facts-key-file`, else the data directory's key file, else $PATHGRADE_FACTS_KEY_FILE;
    None when there is none (uncaptured arguments then get no score). A file that is
    given but unreadable is a CliError."""
    from pathgrade.content.fingerprints import FactSecret
    from pathgrade.stack.store_access import facts_key_file

    path = args.facts_key_file
    if path is None and not getattr(args, "clickhouse", None):
        in_data_dir = facts_key_file(args.data_dir)
        path = in_data_dir if in_data_dir.exists() else None
    path = path or os.environ.get(FACTS_KEY_ENV)
    if path is None:
        return None
    try:
        return FactSecret.from_file(path)
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def validation_reason(exc: ValidationError) -> str:
    """The first problem of a model's ValidationError: a validator's own ValueError as
    it reads (`replays: must be at least 1, got 0`), else `field: pydantic's message`."""
    error = exc.errors()[0]
    raised = error.get("ctx", {}).get("error")
    if raised is not None:
        return str(raised)
    return f"{'.'.join(map(str, error['loc']))}: {error['msg']}"


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (limits, counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def retention_args(parser: argparse.ArgumentParser) -> None:
    """`--content-retention-days N` / `--retention-days N`: how long the store keeps
    captured content, and span rows with their facts (migration 0010's defaults)."""
    from pathgrade.schemas.migrations import DEFAULT_CONTENT_RETENTION_DAYS, DEFAULT_RETENTION_DAYS

    parser.add_argument(
        "--content-retention-days", type=positive_int, metavar="N",
        help="keep captured tool arguments, results and messages N days from the span's "
        f"arrival (default {DEFAULT_CONTENT_RETENTION_DAYS})",
    )  # fmt: skip
    parser.add_argument(
        "--retention-days", type=positive_int, metavar="N",
        help=f"keep span rows and their facts N days (default {DEFAULT_RETENTION_DAYS})",
    )  # fmt: skip


def retention_of(args: argparse.Namespace) -> tuple[int, int] | None:
    """(content days, row days) when either flag was given, the other at its default;
    None when neither was. A CliError when content would outlive the rows."""
    from pathgrade.batch_plane.store.migration_runner import retention_ddl
    from pathgrade.schemas.migrations import DEFAULT_CONTENT_RETENTION_DAYS, DEFAULT_RETENTION_DAYS

    if args.content_retention_days is None and args.retention_days is None:
        return None
    days = (
        args.content_retention_days or DEFAULT_CONTENT_RETENTION_DAYS,
        args.retention_days or DEFAULT_RETENTION_DAYS,
    )
    try:
        retention_ddl(*days)
    except ValueError as exc:
        raise CliError(f"--content-retention-days/--retention-days: {exc}") from exc
    return days


def listen_address(text: str) -> tuple[str, int]:
    """An argparse type: `HOST:PORT` to listen on."""
    from pathgrade.stack.metrics import parse_listen

    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def stop_on_signal() -> threading.Event:
    """An event SIGINT or SIGTERM sets (handlers installed now, in the main thread)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


@contextmanager
def served_metrics(
    listen: tuple[str, int] | None, process: str, counters: Callable[[], Any]
) -> Iterator[None]:
    """`--metrics-listen`: `counters()` served as `process`'s metrics while the block runs
    (nothing without an address); a port that cannot be had is a CliError."""
    if listen is None:
        yield
        return
    from pathgrade.stack.metrics import serve_metrics

    try:
        server = serve_metrics(listen, process, counters)
    except OSError as exc:
        raise CliError(str(exc)) from exc
    try:
        yield
    finally:
        server.stop()


def metrics_arg(parser: argparse.ArgumentParser) -> None:
    """`--metrics-listen HOST:PORT`: serve the process's counters to Prometheus."""
    parser.add_argument(
        "--metrics-listen", metavar="HOST:PORT", type=listen_address,
        help="serve this process's counters at http://HOST:PORT/metrics in Prometheus's text "
        "format (e.g. 0.0.0.0:9464 for a scraper in the cluster); off by default",
    )  # fmt: skip


def log_format_arg(parser: argparse.ArgumentParser) -> None:
    """`--log-format human|json`: how the process prints the alerts it raises."""
    from pathgrade.cli.model_flags import model_flag
    from pathgrade.stack.alert_lines import LOG_FORMATS, AlertLineSettings

    model_flag(parser, "--log-format", AlertLineSettings, "log_format", choices=LOG_FORMATS)


def store_args(parser: argparse.ArgumentParser, tenant: bool = False) -> None:
    """`--data-dir` and `--clickhouse`: where the command finds the store; with `tenant`,
    `--tenant` too (`tenant_arg`)."""
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR,
        help="embedded store and spill directory (default ./pathgrade-data)",
    )  # fmt: skip
    parser.add_argument(
        "--clickhouse", metavar="DSN|URL", default=os.environ.get(CLICKHOUSE_ENV) or None,
        help="a ClickHouse server (http://user:pass@host:8123/db; https://...:8443/db?ca_cert="
        f"FILE for TLS) instead of the embedded store; default ${CLICKHOUSE_ENV}, which keeps "
        "the password off the command line",
    )  # fmt: skip
    if tenant:
        tenant_arg(parser)


def tenant_arg(parser: argparse.ArgumentParser) -> None:
    """`--tenant T`: the command reads only that tenant's rows and writes its rows as it."""
    parser.add_argument(
        "--tenant", metavar="TENANT",
        help="work as this tenant: read only its rows of every table that has a tenant "
        "(spans, alerts, scores, datasets, runs, gates, ...) and write datasets, runs and "
        "gates as its (default: read every tenant's, write as 'default')",
    )  # fmt: skip


def realtime_settings(path: Path | None, **flags: Any) -> dict[str, Any]:
    """Realtime plane settings (`RealtimeConfig` fields but `bootstrap_servers`, which
    `--kafka` gives): the YAML mapping at `path`, then the `flags` that are not None on
    top. Validated here, so a bad file fails before anything starts (CliError naming the
    file and the field)."""
    from pathgrade.stack.settings import StackSettingsError, check_realtime

    settings = settings_file(path, "realtime settings")
    if "bootstrap_servers" in settings:
        raise CliError(f"{path}: bootstrap_servers: set the broker with --kafka instead")
    settings.update({key: value for key, value in flags.items() if value is not None})
    try:
        check_realtime(settings, f"{path}: " if path else "realtime settings: ")
    except StackSettingsError as exc:
        raise CliError(str(exc)) from None
    return settings


def settings_file(path: Path | None, what: str) -> dict[str, Any]:
    """The YAML mapping at `path` ({} without one); a CliError naming the file when it
    cannot be read or is not a mapping of `what`."""
    import yaml

    if path is None:
        return {}
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"{path}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise CliError(f"{path}: expected a mapping of {what}")
    return loaded


OTLP_HEADERS_ENV = ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
"""Where the results exporter's headers come from without `--export-otlp-header` (the
OpenTelemetry exporters' variables: `name=value,name=value`, values URL-encoded)."""


def export_args(parser: argparse.ArgumentParser) -> None:
    """`--export-otlp URL` and its companions: where and how scores and alerts are sent
    as OTLP log records (`ExportConfig`)."""
    from pathgrade.batch_plane.export.config import ExportConfig
    from pathgrade.cli.model_flags import model_flag

    model_flag(
        parser, "--export-otlp", ExportConfig, "url", metavar="URL",
        prefix="send every stored score and alert as an OTLP log record to this ",
    )  # fmt: skip
    parser.add_argument(
        "--export-otlp-header", action="append", type=header_arg, metavar="NAME=VALUE",
        help="a header of every export request, e.g. authorization=Bearer TOKEN (repeatable; "
        f"default: ${OTLP_HEADERS_ENV[0]} or ${OTLP_HEADERS_ENV[1]}, which keep a token off "
        "the command line)",
    )  # fmt: skip
    model_flag(
        parser, "--export-otlp-tenant", ExportConfig, "tenants", unset=True, action="append",
        metavar="TENANT", suffix="; repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--export-otlp-config", type=Path, metavar="FILE",
        help="results exporter settings as YAML (docs/stack.md: batches, retries, settle "
        "time); the flags above override it",
    )  # fmt: skip


def header_arg(text: str) -> tuple[str, str]:
    """An argparse type: `NAME=VALUE`."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def export_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """The results exporter's settings (`ExportConfig` fields) from --export-otlp-config
    and the flags on top, headers from the environment when no flag names one; None when
    nothing asks for an export. Validated: a CliError names the flag or the file's field."""
    from opentelemetry.util.re import parse_env_headers

    from pathgrade.stack.settings import StackSettingsError, check_export

    path = args.export_otlp_config
    settings = settings_file(path, "results exporter settings")
    flags: dict[str, Any] = {
        "url": args.export_otlp,
        "headers": dict(args.export_otlp_header) if args.export_otlp_header else None,
        "tenants": args.export_otlp_tenant,
    }
    settings.update({key: value for key, value in flags.items() if value is not None})
    if not settings:
        return None
    if "headers" not in settings:
        variable = next((name for name in OTLP_HEADERS_ENV if os.environ.get(name)), None)
        if variable:
            settings["headers"] = parse_env_headers(os.environ[variable], liberal=True)
    labels = {"url": "--export-otlp", "headers": "--export-otlp-header",
              "tenants": "--export-otlp-tenant"}  # fmt: skip
    labels = {field: label for field, label in labels.items() if flags[field] is not None}
    try:
        check_export(settings, labels, f"{path}: " if path else "")
    except StackSettingsError as exc:
        raise CliError(str(exc)) from None
    return settings


@contextmanager
def cli_store(args: argparse.Namespace, must_exist: bool = True) -> Iterator[Store]:
    """The store of `--data-dir`/`--clickhouse` (one tenant's with `--tenant`); store
    errors become CliErrors (exit 2 when the store cannot be opened, 1 when a query
    fails)."""
    from pathgrade.batch_plane.store.errors import QueryError, StoreUnavailable
    from pathgrade.batch_plane.store.tenancy import TenantStore
    from pathgrade.stack.store_access import NoStore, open_store

    tenant = getattr(args, "tenant", None)
    try:
        with open_store(args.data_dir, args.clickhouse, must_exist=must_exist) as store:
            yield TenantStore(store, tenant) if tenant else store
    except (NoStore, StoreUnavailable) as exc:
        raise CliError(str(exc)) from exc
    except QueryError as exc:
        raise CliError(f"store: {exc}", exit_code=1) from exc


def message_key_setting(args: argparse.Namespace, bootstrap: str) -> str | None:
    """The message key (hex) a box or command signs and checks its Kafka messages with
    (`transport.message_auth`): the file $PATHGRADE_KAFKA_MESSAGE_KEY_FILE names, else, when
    `bootstrap` is the bundled broker of the `pathgrade up` running on `--data-dir`, that
    stack's (the file its owner-only stack.json names); None otherwise. A bad key file is a
    CliError."""
    from pathgrade.stack.ownership import read_state
    from pathgrade.transport.message_auth import MessageKey, message_key_from_env

    data_dir = getattr(args, "data_dir", None)
    try:
        key = message_key_from_env()
        state = read_state(data_dir.resolve()) if data_dir is not None and key is None else None
        if state and state.get("kafka") == bootstrap and state.get("message_key_file"):
            key = MessageKey.from_file(state["message_key_file"])
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    except OSError:  # another user's stack: its key is not ours to read
        key = None
    return key.hex if key is not None else None


def agent_tracer_provider(args: argparse.Namespace) -> tuple[Any, Any]:
    """The global TracerProvider for in-process agents: eval context + OTLP to --otlp."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from pathgrade.batch_plane.agents.adapters import EvalContextSpanProcessor
    from pathgrade.batch_plane.agents.span_export import RecordingExporter, exporter_for_url

    headers = {"authorization": f"Bearer {args.token}"} if args.token else None
    try:
        recorder = RecordingExporter(exporter_for_url(args.otlp, headers))
    except ValueError as exc:
        raise CliError(f"--otlp: {exc}") from exc
    name = os.environ.get("OTEL_SERVICE_NAME", "pathgrade-edge-agent")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(EvalContextSpanProcessor())
    provider.add_span_processor(BatchSpanProcessor(recorder))
    trace.set_tracer_provider(provider)
    return provider, recorder


def int_between(low: int, high: int, meaning: str) -> Callable[[str], int]:
    """An argparse type: an integer in low..high (`meaning` names it in the error)."""

    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low}..{high} ({meaning}), got {value}")
        return value

    return parse


def wait_for_signal(signalled: threading.Event) -> None:
    """Block until `signalled` (from `stop_on_signal`, called before the box prints that it
    is ready, so a signal right after that line stops it cleanly) is set."""
    while not signalled.wait(1.0):
        pass


def collector_args(parser: argparse.ArgumentParser) -> None:
    """The collector's flags; their help is `CollectorConfig`'s (defaults written once)."""
    from pathgrade.cli.model_flags import model_flag
    from pathgrade.collector.config import CollectorConfig as Config
    from pathgrade.collector.redaction_config import RedactionConfig

    parser.add_argument(
        "--config", type=Path, metavar="FILE",
        help="collector settings as YAML (docs/collector.md); the flags below override it",
    )  # fmt: skip
    model_flag(parser, "--grpc-port", Config, "grpc_port", unset=True, type=int)
    model_flag(parser, "--http-port", Config, "http_port", unset=True, type=int)
    model_flag(parser, "--listen-host", Config, "listen_host", unset=True)
    model_flag(parser, "--tokens-file", Config, "tokens_file", type=Path)
    model_flag(parser, "--max-body-bytes", Config, "max_body_bytes", unset=True, type=int)
    model_flag(
        parser, "--capture-tools", RedactionConfig, "capture_tools", unset=True,
        prefix="comma-separated ", metavar="NAMES",
    )  # fmt: skip
    for flag in ("--capture-messages", "--capture-identity"):
        field = flag[2:].replace("-", "_")
        model_flag(parser, flag, RedactionConfig, field, unset=True, action="store_true")
    model_flag(
        parser, "--allow-keys", RedactionConfig, "allowed_keys", unset=True,
        prefix="comma-separated ", metavar="KEYS",
    )  # fmt: skip
    model_flag(parser, "--facts-key-file", Config, "facts_key_file", type=Path, metavar="FILE")


def collector_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Collector config fields from --config and the flags (flags win), validated: a bad
    one is a CliError naming the flag (`--http-port 99999: ...`) or the file's field."""
    from pathgrade.stack.settings import StackSettingsError, check_collector

    settings = settings_file(args.config, "collector settings")
    flags = {
        "grpc_port": args.grpc_port,
        "http_port": args.http_port,
        "listen_host": args.listen_host,
        "tokens_file": args.tokens_file and str(args.tokens_file),
        "max_body_bytes": args.max_body_bytes,
        "facts_key_file": args.facts_key_file and str(args.facts_key_file),
    }
    settings.update({key: value for key, value in flags.items() if value is not None})
    redaction = dict(settings.get("redaction") or {})
    if args.capture_tools is not None:
        redaction["capture_tools"] = [n.strip() for n in args.capture_tools.split(",") if n.strip()]
    if args.allow_keys is not None:
        redaction["allowed_keys"] = [k.strip() for k in args.allow_keys.split(",") if k.strip()]
    if args.capture_messages is not None:
        redaction["capture_messages"] = args.capture_messages
    if args.capture_identity is not None:
        redaction["capture_identity"] = args.capture_identity
    if redaction:
        settings["redaction"] = redaction
    labels = {
        field: f"--{field.replace('_', '-')} {value}"
        for field, value in flags.items()
        if value is not None
    }
    try:
        check_collector(settings, labels, f"{args.config}: " if args.config else "")
    except StackSettingsError as exc:
        raise CliError(str(exc)) from None
    return settings
