"""The house's layering rules, written once: the folders of the code base in order, what
each holds, and its rooms with the rooms and libraries each may import.

A *room* is a set of modules under one import rule: a layer (`schemas`, `detectors`, ...),
a sub-package of one (`batch_plane.store`, `demo.writers`) or one module of the command line
(`cli.gate`). A *family* (`cli.<command>`) names rooms that share a rule but are rooms of
their own, so they may not import each other unless the rule says so. A room may always
import itself. `tests/test_import_direction.py` checks the sources against these rules
(`tests/support/imports.py`), and `python -m pathgrade.cli.reference --write` renders
docs/layout.md's folder table from them (`layout_table`); the tests fail when the committed
table differs. Every folder may import only folders listed before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Room:
    """Modules under one import rule. `name` is the module path under `pathgrade` (a
    package's `__init__` alone is a room when its sub-packages are rooms of their own);
    a family's name reads `<prefix>.<kind>`, its rooms are `<prefix>.<member>`. `imports`
    names rooms or families; `libraries` (top-level names) are all it may import besides
    the standard library and pathgrade (None: any)."""

    name: str
    imports: tuple[str, ...] = ()
    libraries: tuple[str, ...] | None = None
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Folder:
    """A row of the layout table: a folder (or a few), what it holds, its rooms."""

    path: str
    holds: str
    rooms: tuple[Room, ...] = ()


LAYERS = ("schemas", "content", "stats", "transport", "collector", "detectors", "realtime_plane")
"""Top-level folders that are one room each (with `stack` and `web` under `pathgrade/`)."""
SPLIT = ("batch_plane", "cli", "demo")
"""Packages each of whose sub-packages and modules is a room of its own."""
ALIASES = {"cli.__main__": "cli.main"}
"""Modules that belong to another module's room."""
PACKAGE_DIRS = {
    "schemas": "pathgrade.schemas",
    "content": "pathgrade.content",
    "collector": "pathgrade.collector",
    "detectors": "pathgrade.detectors",
    "transport": "pathgrade.transport",
    "realtime_plane": "pathgrade.realtime_plane",
    "batch_plane": "pathgrade.batch_plane",
    "stats": "pathgrade.stats",
    "pathgrade": "pathgrade",
}
"""Source folder -> the package it installs as (pyproject's package-dir)."""

BATCH = ("batch_plane.store", "batch_plane.agents", "batch_plane.scoring", "batch_plane.edge",
         "batch_plane.evaluation", "batch_plane.export")  # fmt: skip
"""The rooms of the batch plane (below its package's `__init__`)."""
SCORING_USES = ("schemas", "content", "transport", "detectors", "batch_plane.store")
"""What `batch_plane.scoring` may import, and `edge` and `evaluation` besides theirs."""
BELOW_PATHGRADE = (*LAYERS, "batch_plane", *BATCH)
"""Every room outside `pathgrade/`."""
DEMO = ("demo", "demo.options", "demo.scenarios", "demo.writers", "demo.sender", "demo.pages")
"""The demo's rooms."""
CLI_HELPERS = ("support", "output", "agents", "suite_scoring", "alert_follow", "progress",
               "parser", "model_flags", "reference", "layout")  # fmt: skip
"""The command line's shared modules: the rooms of family `cli.<helper>`."""
CLI_COMMANDS = ("stack", "boxes", "demo", "store", "alerts", "monitors", "datasets", "edge",
                "gate", "scoring", "review", "ui")  # fmt: skip
"""One module per command group: the rooms of family `cli.<command>`."""
CLI_USES = (*BELOW_PATHGRADE, "pathgrade", "stack", "web", *DEMO, "cli.<helper>")
"""What a helper or a command may import (never another command)."""

FOLDERS: tuple[Folder, ...] = (
    Folder(
        "schemas/",
        "definitions, no algorithm over content: the canonical model, GenAI names, the "
        "convention mappings, the lexicons and the kinds of personal data as tables, the "
        "facts contract (names, types, its reader), "
        "ClickHouse DDL migrations (the files, `Migration`, the columns retention clears), "
        "Kafka topic and header names, the `Store` protocol and "
        "the protocols the realtime plane reads the store through "
        "(`alert_store.AlertStore`), the fast paths' decline contract",
        (Room("schemas", libraries=("pydantic", "opentelemetry", "google")),),
    ),
    Folder(
        "content/",
        "algorithms over span content, above the definitions: the OTLP decoders (`otlp`, "
        "`otlp_logs`, the C reader `_otlp_reader`), the convention mapping's reader "
        "(`conventions`), messages and events (`messages`, `events`, `event_content`), "
        "personal data (`pii`), content predicates (`predicates`), keyed fingerprints and "
        "withheld marks (`fingerprints`, `withheld`), the facts producer (`facts_producer`), "
        "a trace's agent turns, graph walks and hand-offs (`agent_turns`, `graph_walk`, "
        "`handoffs`), agent graph documents read, imported from LangGraph and checked "
        "(`graph_documents`), what a turn brings to a monitor rollup (`turn_rollups`: its "
        "slices, end and example), number parsing (`numbers`), the hot path's memo (`memo`)",
        (Room("content", ("schemas",), libraries=("opentelemetry", "google")),),
    ),
    Folder(
        "stats/",
        "statistics both planes use: the percentile bootstrap of the release gate and the monitors",
        (Room("stats", libraries=("numpy",)),),
    ),
    Folder(
        "transport/",
        "what travels between boxes and who may send it: the consumer-group member every "
        "plane's Kafka loop is (`consumer.py`: subscribe, rebalance callbacks, "
        "decode-and-skip, commit after work, the poll loop), the settings every Kafka client "
        "shares (`kafka_settings.py`: the address, TLS and SASL from `PATHGRADE_KAFKA_*`, a "
        "consumer group's settings), reading a topic until it is drained (`drain.py`), the "
        "stack's message key and its "
        "MAC (`message_auth.py`) and message signing (`signing.py`), the bearer tokens that "
        "name a sender's tenant (`bearer_tokens.py`, checked by the collector's receivers and "
        "the UI's viewers), a writer's stalls and the waits between its retries "
        "(`stalls.py`), pathgrade's verdicts as OTLP log records "
        "(`evaluation_records.py`: what the export sends, the shape `--events-out` writes), "
        "and the uvicorn server every HTTP box runs on, its housekeeping loop asleep while "
        "idle (`quiet_server.py`)",
        (Room("transport", ("schemas", "content")),),
    ),
    Folder(
        "collector/",
        "OTLP receivers, validation, redaction (the allow-list at work: `allow_list`), Kafka "
        "publishing, the spill",
        (Room("collector", ("schemas", "content", "transport")),),
    ),
    Folder(
        "detectors/",
        "the detector rules PG100-PG118, their registry (code, name, severity, stability, doc "
        "in fixed sections, described params) and policy; `catalogue` renders "
        "[detectors.md](detectors.md)",
        (Room("detectors", ("schemas", "content")),),
    ),
    Folder(
        "realtime_plane/",
        "Kafka consumers: trace assembly, detector runs, the alert sinks behind one "
        "`AlertSink` protocol (log line, alerts topic, `alerts` table, webhook), the sampler, "
        "the monitors",
        (Room("realtime_plane", ("schemas", "content", "stats", "transport", "detectors")),),
    ),
    Folder(
        "batch_plane/",
        "the batch plane's package (`__init__`); its rooms are the folders below",
        (Room("batch_plane"),),
    ),
    Folder(
        "batch_plane/store/",
        "the store room: the ClickHouse client path (a writer and a read-only reader "
        "session; what a reader may run), the client through the stack's store owner "
        "(`remote`), tenancy (a viewer's rows, `TenantStore`), the store writer, span and "
        "trace rows, and one module of typed queries per table or family (`alerts`, "
        "`traces`, `trace_list`, `conversations`, `scores`, `runs`, `gates`, `datasets`, "
        "`review`, `judges`, `edge_runs`, `monitors`, `deliveries`, `results_backlog`, "
        "`demo_rows`, `catalog`) that pages, commands, scorers and the realtime plane call "
        "instead of writing SQL; the migrations' runner (`migration_runner`: apply, record "
        "and check them, retention, the printed DDL) and their layout on a cluster "
        "(`cluster_ddl`: replicated or sharded); the SQL insert of OTLP (`otlp_insert`) "
        "with the SQL compiled from the convention mapping (`genai_sql`) and the `.proto` "
        "and structure "
        "of a `pathgrade.spans` value generated from OTLP's descriptors (`otlp_proto`); "
        "typed reads take a `schemas.store.ReadableStore` (any `Store`, or the UI's "
        "read-only `ReadStore`)",
        (Room("batch_plane.store", ("schemas", "content", "transport")),),
    ),
    Folder(
        "batch_plane/agents/",
        "agent adapters: calling the agent under test (`adapters`), and the OTLP span "
        "exporter it (or the demo agent) writes to (`span_export`)",
        (Room("batch_plane.agents", ("schemas", "content")),),
    ),
    Folder(
        "batch_plane/scoring/",
        "trajectory scorers, judges, rubrics, calibration, the per-trace scorer set, the "
        "online scorer",
        (Room("batch_plane.scoring", SCORING_USES),),
    ),
    Folder(
        "batch_plane/edge/",
        "paths, simulation, determinism metrics, production traffic (infer, coverage, "
        "recommend), EDGE store and report",
        (Room("batch_plane.edge", (*SCORING_USES, "batch_plane.agents", "batch_plane.scoring")),),
    ),
    Folder(
        "batch_plane/evaluation/",
        "datasets, runs, replay, suites, the release gate",
        (
            Room(
                "batch_plane.evaluation",
                (*SCORING_USES, "stats", "batch_plane.agents", "batch_plane.scoring"),
            ),
        ),
    ),
    Folder(
        "batch_plane/export/",
        "evaluation results out: scores and alerts read from their tables after a durable "
        "cursor, sent as OTLP log records ([stack.md](stack.md#evaluation-results-out))",
        (Room("batch_plane.export", ("schemas", "content", "transport", "batch_plane.store")),),
    ),
    Folder(
        "pathgrade/",
        "the `pathgrade` namespace's package (`__init__`); the folders below are in it",
        (Room("pathgrade"),),
    ),
    Folder(
        "pathgrade/demo/",
        "the demo agent: `options` (what `pathgrade demo` sends by default), `scenarios` "
        "(seeded turn plans), `writers` (GenAI, OpenInference, OpenLLMetry attribute "
        "writers), `sender` (OTLP through the official SDK), `pages` (what `up --demo` runs "
        "to fill every page)",
        (
            Room("demo"),
            Room("demo.options"),
            Room("demo.scenarios", ("schemas",)),
            Room("demo.writers", ("schemas", "demo.options", "demo.scenarios")),
            Room(
                "demo.sender",
                ("schemas", "batch_plane.agents", "demo.options", "demo.scenarios", "demo.writers"),
            ),
            Room(
                "demo.pages",
                (
                    "schemas",
                    "batch_plane.agents",
                    "demo.options",
                    "demo.scenarios",
                    "demo.writers",
                    "demo.sender",
                ),
            ),
        ),
    ),
    Folder(
        "pathgrade/web/",
        "the browser UI (Starlette app, Jinja2 templates, server-side SVG, `pathgrade ui`, "
        "its scrape of the boxes' `/metrics`), and the metrics' names the exporter shares "
        "with it (`metric_names`)",
        (Room("web", (*BELOW_PATHGRADE, "pathgrade")),),
    ),
    Folder(
        "pathgrade/stack/",
        "the embedded stack: child processes and their supervision, settings checked first, "
        "bundled broker, store owner and its loopback endpoint (`store_endpoint`; the client "
        "is the store room's `remote`), ownership, status, the Prometheus exporter every box "
        "serves (`metrics`) ([stack.md](stack.md))",
        (Room("stack", (*BELOW_PATHGRADE, "pathgrade", "web", *DEMO)),),
    ),
    Folder(
        "pathgrade/cli/",
        "the command line: `main` (the parser of every command), one module per command "
        "group (the commands), shared helpers (`support`, `output`, `agents`, "
        "`suite_scoring`, `model_flags`: flags that set a settings model's field, ...; "
        "`reference` renders the generated docs, the default allow-list's and the GenAI "
        "convention versions' sections among them, `layout` holds these rules); a command "
        "module imports at its top only what its parser needs, the rest in the handler",
        (
            Room("cli"),
            Room("cli.<helper>", CLI_USES, members=CLI_HELPERS),
            Room("cli.<command>", CLI_USES, members=CLI_COMMANDS),
            Room("cli.main", (*CLI_USES, "cli", "cli.<command>")),
        ),
    ),
    Folder(
        "`bench/`, `examples/`, `deploy/`, `docs/`",
        "benchmarks, sample agents and graphs, compose/Kubernetes/Grafana/Prometheus, docs",
    ),
    Folder(
        "tests/",
        "`unit/` mirrors the packages (`tests/unit/batch_plane/edge/`, ...); `integration/` "
        "runs the real broker and engine; `support/` holds what tests share (and the import "
        "checker, `support/imports.py`)",
    ),
)
"""The layout table, in order: a folder's rooms import only rooms of the folders before
it (and their own folder's, as their rules say)."""


def rooms() -> dict[str, Room]:
    """Room or family name -> its room, over every folder."""
    return {room.name: room for folder in FOLDERS for room in folder.rooms}


def members(room: Room) -> list[str]:
    """The names of the rooms a room or family stands for."""
    if not room.members:
        return [room.name]
    prefix = room.name.rpartition(".")[0]
    return [f"{prefix}.{member}" for member in room.members]


def expanded(names: Iterable[str]) -> set[str]:
    """Room and family names -> the room names they stand for."""
    by_name = rooms()
    return {member for name in names for member in members(by_name[name])}


def allowed() -> dict[str, set[str]]:
    """Room -> the rooms it may import (besides itself)."""
    return {member: expanded(room.imports) for room in rooms().values() for member in members(room)}


def libraries() -> dict[str, set[str]]:
    """Room -> the libraries it may import besides the standard library, for the rooms that
    are held to a list."""
    return {
        member: set(room.libraries)
        for room in rooms().values()
        if room.libraries is not None
        for member in members(room)
    }


def room_of(module: str) -> str | None:
    """The room of an installed module name (`pathgrade.batch_plane.edge.graph` ->
    `batch_plane.edge`), None for a module outside pathgrade or its rooms."""
    parts = module.split(".")
    if parts[0] != "pathgrade":
        return None
    rest = parts[1:]
    if not rest:
        return "pathgrade"
    head = rest[0]
    if head in SPLIT:
        name = ".".join(rest[:2])
        return ALIASES.get(name, name)
    if head in (*LAYERS, "stack", "web"):
        return head
    return None


COMPLEMENT_AFTER = 5
"""A cell lists up to this many whole folders by name, more as 'the folders above'."""


def _label(room: Room, folder: Folder) -> str:
    """A room's name in its folder's cell ("" when the folder is one room): `__init__`
    for the package's own, else its name inside the folder (`main`, `<command>`)."""
    if len(folder.rooms) == 1:
        return ""
    return "`__init__`" if "." not in room.name else f"`{room.name.split('.', 1)[1]}`"


def _targets(names: Iterable[str], before: list[Folder], own: Folder) -> str:
    """The rooms `names` stands for: whole folders where every room of a folder is meant,
    else rooms; as 'the folders above (but one)' past COMPLEMENT_AFTER whole folders."""
    wanted = expanded(names)
    earlier = [folder for folder in before if folder.rooms]
    whole = [f for f in earlier if expanded(room.name for room in f.rooms) <= wanted]
    rest = [f for f in earlier if f not in whole]
    parts = [f"`{room.name}`" for f in [*rest, own] for room in f.rooms
             if set(members(room)) <= wanted]  # fmt: skip
    if not whole and not parts:
        return "nothing of ours"
    if len(whole) > COMPLEMENT_AFTER and len(rest) <= 1:
        but = f" but `{rest[0].path}`" if rest else ""
        return "the folders above" + but + (" and " + ", ".join(parts) if parts else "")
    return ", ".join([*(f"`{f.path}`" for f in whole), *parts])


def _may_import(folder: Folder, before: list[Folder]) -> str:
    """The table's cell of what a folder's rooms may import."""
    if not folder.rooms:
        return "-"
    cells = []
    for room in folder.rooms:
        text = _targets(room.imports, before, folder)
        if room.libraries is not None:
            text += "; libraries: " + ", ".join(f"`{name}`" for name in room.libraries)
        label = _label(room, folder)
        cells.append(f"{label}: {text}" if label else text)
    return "; ".join(cells)


def layout_table() -> str:
    """docs/layout.md's folder table: folder, what it holds, what it may import."""
    rows = ["| folder | holds | may import |", "|---|---|---|"]
    for index, folder in enumerate(FOLDERS):
        path = folder.path if folder.path.startswith("`") else f"`{folder.path}`"
        rows.append(f"| {path} | {folder.holds} | {_may_import(folder, list(FOLDERS[:index]))} |")
    return "\n".join(rows)
