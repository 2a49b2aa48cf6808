"""Versioned datasets of evaluation items, kept in the store (tables `datasets`,
`dataset_items`, migration 0005).

A dataset has a name (e.g. `golden/support`), a kind and an owner. Each version is a draft
until published; a published version is immutable: adding to it is an error naming it, and
`create` on a published name starts the next version as a draft holding a copy of the
latest items. A reference `NAME@N` names version N; a bare `NAME` names the latest version.

Items travel as JSONL (`parse_items`, `dump_items`); a bad line is reported as
`source:line: field: reason`. Items made from stored traces keep `source_trace_id`.

A regression item made from a failure (`triage`, `from-traces` into a regression
dataset) keeps the trace as evidence, the user's input, and the lesson as its checks: the
detector codes that fired stay quiet (`detectors_quiet`) and the offending calls are not
made again (`tool_not_called`); it expects tool calls only when they are given (the
failing path is no expectation).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pathgrade.batch_plane.evaluation.end_state import check_paths
from pathgrade.batch_plane.evaluation.suite import format_loc
from pathgrade.batch_plane.scoring.checks import CheckSpec
from pathgrade.batch_plane.scoring.checks.field_errors import did_you_mean, error_reasons
from pathgrade.batch_plane.store import alerts as stored_alerts
from pathgrade.batch_plane.store import datasets as stored_datasets
from pathgrade.batch_plane.store.trace_rows import find_trace_ids, load_traces
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace
from pathgrade.schemas.store import Store
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

DatasetKind = Literal["golden", "regression", "adversarial", "benchmark"]
KINDS: tuple[str, ...] = ("golden", "regression", "adversarial", "benchmark")
DRAFT, PUBLISHED = "draft", "published"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


class DatasetError(ValueError):
    """A dataset operation or item file that cannot be accepted; `problems` lists why."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def lesson_checks(must_not_fire: Iterable[str], forbidden: Iterable[str]) -> list[CheckSpec]:
    """A failure's lesson as checks: the detector codes that fired stay quiet
    (`detectors_quiet`), and each forbidden tool is not called (`tool_not_called`)."""
    codes = sorted(set(must_not_fire))
    quiet = [{"check": "detectors_quiet", "codes": codes}] if codes else []
    return [CheckSpec.model_validate(spec) for spec in quiet] + [
        CheckSpec.model_validate({"check": "tool_not_called", "tool": tool})
        for tool in dict.fromkeys(forbidden)
    ]


def _legacy_lesson(check: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks from a regression `check` stored before the checks catalogue
    (`{"must_not_fire": [codes], "forbidden_calls": [{"name", "args"?}]}`)."""
    if not isinstance(check, dict) or set(check) - {"must_not_fire", "forbidden_calls"}:
        raise ValueError("expected {must_not_fire, forbidden_calls} (write `checks` instead)")
    codes = check.get("must_not_fire") or []
    quiet = [{"check": "detectors_quiet", "codes": codes}] if codes else []
    return quiet + [
        {"check": "tool_not_called", "tool": call.get("name"), "args": call.get("args") or {}}
        for call in check.get("forbidden_calls") or []
    ]


Call = dict[str, Any]
CALL_KEYS = ("name", "args")
"""The keys of an expected tool call: the tool's name and (optionally) its arguments."""


STORED = "stored"
"""Validation context key: the item is read back from the store, where it was accepted
before (it is read as it was stored, so an item accepted earlier is never lost)."""


def _named_calls(calls: list[Call], info: ValidationInfo, where: str = "") -> list[Call]:
    """Calls `{"name", "args"?}`: a non-empty name and, for an item not yet stored,
    arguments as an object and no other key (a misspelt one is named with the key it likely
    meant); `where` prefixes the call's place in a message."""
    stored = bool(info.context and info.context.get(STORED))
    for index, call in enumerate(calls):
        at = f"{where}call {index}"
        unknown = [key for key in call if key not in CALL_KEYS]
        if unknown and not stored:
            raise ValueError(
                f"{at}: {unknown[0]}: unknown key{did_you_mean(unknown[0], CALL_KEYS)}"
            )
        if not isinstance(call.get("name"), str) or not call["name"]:
            raise ValueError(f"{at} needs a non-empty string `name`")
        if not isinstance(call.get("args", {}), dict) and not stored:
            raise ValueError(f"{at}: args: expected an object of argument values")
    return calls


class DatasetItem(BaseModel):
    """One evaluation item: the input, what a good answer and a good path look like, the
    checks that apply to it (`checks`, from the catalogue), what the sandbox must hold
    after it (`end_state`), the slice labels and the trace it came from (if any)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str = Field(min_length=1)
    input: dict[str, Any] | str
    reference_answer: str | None = None
    reference_contexts: list[str] = Field(default_factory=list)
    """Texts the item's retrieval should find (context precision and recall by text)."""
    reference_context_ids: list[str] = Field(default_factory=list)
    """Ids of the documents the item's retrieval should find (by ids)."""
    expected_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    alternative_trajectories: list[list[dict[str, Any]]] = Field(default_factory=list)
    checks: list[CheckSpec] = Field(default_factory=list)
    end_state: dict[str, Any] = Field(default_factory=dict)
    slices: dict[str, str] = Field(default_factory=dict)
    source_trace_id: str = ""
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _legacy_check(cls, data: Any) -> Any:
        """A regression item written before the catalogue (`check`) reads as its checks."""
        if not isinstance(data, dict) or "check" not in data:
            return data
        rest = {key: value for key, value in data.items() if key != "check"}
        lesson = _legacy_lesson(data["check"]) if data["check"] else []
        return {**rest, "checks": [*rest.get("checks", []), *lesson]}

    @field_validator("expected_tool_calls")
    @classmethod
    def _calls_have_names(cls, calls: list[Call], info: ValidationInfo) -> list[Call]:
        return _named_calls(calls, info)

    @field_validator("alternative_trajectories")
    @classmethod
    def _alternatives_have_names(
        cls, paths: list[list[Call]], info: ValidationInfo
    ) -> list[list[Call]]:
        return [_named_calls(path, info, f"path {n}, ") for n, path in enumerate(paths)]

    @field_validator("end_state")
    @classmethod
    def _dotted_paths(cls, expected: dict[str, Any]) -> dict[str, Any]:
        return dict(check_paths(expected))

    @property
    def conversation_id(self) -> str:
        """The conversation this item is a turn of ("" when it stands alone)."""
        return "" if isinstance(self.input, str) else str(self.input.get("conversation_id", ""))

    @property
    def user_message(self) -> str:
        """The user's turn: `input` when it is text, else `input["user"]`."""
        return self.input if isinstance(self.input, str) else str(self.input.get("user", ""))


ITEM_KEYS: tuple[str, ...] = tuple(DatasetItem.model_fields)
"""The keys an item may have (an unknown one is reported with the nearest of these)."""


class DatasetInfo(BaseModel):
    """One version of a dataset, with its item count."""

    name: str
    version: int
    kind: DatasetKind
    owner: str
    description: str = ""
    status: Literal["draft", "published"]
    created_at_ms: int
    published_at_ms: int | None = None
    items: int = 0

    @property
    def ref(self) -> str:
        """`name@version`."""
        return f"{self.name}@{self.version}"


def parse_ref(ref: str) -> tuple[str, int | None]:
    """`NAME@N` -> (NAME, N); `NAME` -> (NAME, None)."""
    name, sep, version = ref.rpartition("@")
    if not sep:
        name, version = ref, ""
    if not _NAME.match(name):
        raise DatasetError([f"dataset {ref!r}: name must match {_NAME.pattern}"])
    if sep and not version.isdigit():
        raise DatasetError([f"dataset {ref!r}: version after '@' must be a number"])
    return name, int(version) if sep else None


# --------------------------------------------------------------------------- JSONL


def parse_items(text: str, source: str = "<items>") -> list[DatasetItem]:
    """Items from JSONL text; every bad line is reported as `source:line: field: reason`
    (a bad check as `source:line: checks[1]: check 'answer_regex': pattern: reason`; an
    unknown key with the nearest known one)."""
    items: list[DatasetItem] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = DatasetItem.model_validate_json(line)
        except ValidationError as exc:
            errors = exc.errors()
            for error, reason in zip(errors, error_reasons(errors, ITEM_KEYS), strict=True):
                where = format_loc(tuple(error["loc"])) or "(line)"
                problems.append(f"{source}:{number}: {where}: {reason}")
            continue
        if item.item_id in first_line:
            problems.append(
                f"{source}:{number}: item_id: duplicate {item.item_id!r} "
                f"(first on line {first_line[item.item_id]})"
            )
            continue
        first_line[item.item_id] = number
        items.append(item)
    if problems:
        raise DatasetError(problems)
    return items


def dump_items(items: Iterable[DatasetItem]) -> str:
    """Items as JSONL (what `parse_items` reads)."""
    return "".join(item.model_dump_json() + "\n" for item in items)


# --------------------------------------------------------------------------- the store


def _contexts_text(item: DatasetItem) -> str:
    """An item's reference contexts as stored (`ReferenceContexts`); "" for none."""
    if not (item.reference_contexts or item.reference_context_ids):
        return ""
    return json.dumps({"texts": item.reference_contexts, "ids": item.reference_context_ids})


def _stored_contexts(text: str) -> dict[str, list[str]]:
    """The item fields of a stored `ReferenceContexts` value."""
    stored = json.loads(text) if text else {}
    return {
        "reference_contexts": stored.get("texts", []),
        "reference_context_ids": stored.get("ids", []),
    }


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


ITEMS_PER_INSERT = 500
"""Items written per insert, so a large import reports progress as it goes."""
_ITEM_COLUMNS = [
    "Dataset", "Version", "ItemId", "Input", "ReferenceAnswer", "ExpectedToolCalls",
    "AlternativeTrajectories", "Slices", "SourceTraceId", "Tags", "AddedAt", "Checks", "EndState",
    "ReferenceContexts",
]  # fmt: skip
_CHECK_LIST: TypeAdapter[list[CheckSpec]] = TypeAdapter(list[CheckSpec])
_DATASET_COLUMNS = [
    "Name", "Version", "Kind", "Owner", "Description", "Status", "CreatedAt", "PublishedAt",
    "UpdatedAt",
]  # fmt: skip


class Datasets:
    """Dataset versions and their items in a Store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def versions(self, name: str | None = None) -> list[DatasetInfo]:
        """Every version (of `name`, or of all datasets), by name then version."""
        rows = stored_datasets.versions(self.store, name)
        counts: Counter[tuple[str, int]] = Counter()
        for (_, dataset, version), n in stored_datasets.item_counts(self.store, name=name).items():
            counts[(dataset, version)] += n  # a store of several tenants: every tenant's
        return [
            DatasetInfo(
                name=r[0],
                version=r[1],
                kind=r[2],
                owner=r[3],
                description=r[4],
                status=r[5],
                created_at_ms=r[6],
                published_at_ms=r[7],
                items=counts.get((r[0], r[1]), 0),
            )
            for r in rows
        ]

    def resolve(self, ref: str, *, published: bool = False) -> DatasetInfo:
        """The version `ref` names (bare name: the latest, or latest published if asked)."""
        name, version = parse_ref(ref)
        versions = self.versions(name)
        if published:
            versions = [v for v in versions if v.status == PUBLISHED]
        if version is not None:
            versions = [v for v in versions if v.version == version]
        if not versions:
            which = "published version" if published else "version"
            raise DatasetError([f"dataset {ref!r}: no such {which}"])
        return versions[-1]

    def create(self, name: str, kind: str, owner: str, description: str = "") -> DatasetInfo:
        """Start a draft: version 1 of a new dataset, or the next version of a published
        one (holding a copy of the latest version's items)."""
        parse_ref(name)
        if "@" in name:
            raise DatasetError([f"dataset {name!r}: create takes a name without '@version'"])
        if kind not in KINDS:
            raise DatasetError([f"kind: {kind!r} is not one of {', '.join(KINDS)}"])
        existing = self.versions(name)
        if existing and existing[-1].status == DRAFT:
            raise DatasetError([f"dataset {existing[-1].ref} is already a draft: add to it"])
        if existing and existing[-1].kind != kind:
            raise DatasetError([f"kind: dataset {name!r} is {existing[-1].kind!r}, not {kind!r}"])
        version = existing[-1].version + 1 if existing else 1
        now = _now_ms()
        self.store.insert(
            "datasets",
            [[name, version, kind, owner, description, DRAFT, now, None, now]],
            _DATASET_COLUMNS,
        )
        if existing:
            self._insert_items(name, version, self.items(existing[-1].ref))
        return self.resolve(f"{name}@{version}")

    def add(
        self,
        ref: str,
        items: Sequence[DatasetItem],
        progress: Callable[[int, int], None] | None = None,
    ) -> DatasetInfo:
        """Add (or replace, by item id) items of a draft version; a published one refuses.
        `progress(done, total)` after each insert of ITEMS_PER_INSERT items."""
        info = self.resolve(ref)
        if info.status == PUBLISHED:
            raise DatasetError(
                [
                    f"dataset {info.ref} is published and immutable: start a new version "
                    f"with `pathgrade dataset create {info.name} --kind {info.kind}`"
                ]
            )
        for start in range(0, len(items), ITEMS_PER_INSERT):
            chunk = items[start : start + ITEMS_PER_INSERT]
            self._insert_items(info.name, info.version, chunk)
            if progress is not None:
                progress(start + len(chunk), len(items))
        return self.resolve(info.ref)

    def publish(self, ref: str) -> DatasetInfo:
        """Publish a draft version; from now on it is immutable."""
        info = self.resolve(ref)
        if info.status == PUBLISHED:
            raise DatasetError([f"dataset {info.ref} is already published"])
        if info.items == 0:
            raise DatasetError([f"dataset {info.ref} has no items: add some before publishing"])
        now = _now_ms()
        self.store.insert(
            "datasets",
            [[info.name, info.version, info.kind, info.owner, info.description, PUBLISHED,
              info.created_at_ms, now, now]],
            _DATASET_COLUMNS,
        )  # fmt: skip
        return self.resolve(info.ref)

    def items(self, ref: str, *, published: bool = False) -> list[DatasetItem]:
        """The items of the version `ref` names, by item id."""
        info = self.resolve(ref, published=published)
        rows = stored_datasets.items_of_version(
            self.store, info.name, info.version, stored_datasets.STORED_ITEM_FIELDS
        )
        return [
            DatasetItem.model_validate(
                {
                    "item_id": r["ItemId"],
                    "input": json.loads(r["Input"]),
                    "reference_answer": r["ReferenceAnswer"],
                    "expected_tool_calls": json.loads(r["ExpectedToolCalls"]),
                    "alternative_trajectories": json.loads(r["AlternativeTrajectories"]),
                    "slices": r["Slices"],
                    "source_trace_id": r["SourceTraceId"],
                    "tags": r["Tags"],
                    "checks": _stored_checks(r["Checks"], r["RegressionCheck"]),
                    "end_state": json.loads(r["EndState"]) if r["EndState"] else {},
                    **_stored_contexts(r["ReferenceContexts"]),
                },
                context={STORED: True},
            )
            for r in rows
        ]

    def _insert_items(self, name: str, version: int, items: Iterable[DatasetItem]) -> None:
        now = _now_ms()
        rows = [
            [name, version, item.item_id, json.dumps(item.input), item.reference_answer,
             json.dumps(item.expected_tool_calls), json.dumps(item.alternative_trajectories),
             item.slices, item.source_trace_id, item.tags, now,
             _CHECK_LIST.dump_json(item.checks).decode() if item.checks else "",
             json.dumps(item.end_state) if item.end_state else "", _contexts_text(item)]
            for item in items
        ]  # fmt: skip
        self.store.insert("dataset_items", rows, _ITEM_COLUMNS)


def _stored_checks(checks: str, legacy: str) -> list[CheckSpec]:
    """An item's stored checks (column `Checks`), else the regression check stored before
    the catalogue (column `RegressionCheck`, migration 0007) read as checks."""
    if checks:
        return _CHECK_LIST.validate_json(checks)
    return _CHECK_LIST.validate_python(_legacy_lesson(json.loads(legacy))) if legacy else []


# --------------------------------------------------------------------------- from traces


def user_message(trace: Trace) -> str:
    """The user's message of a turn: the last user message the root span received, else
    the first model call's ("" when the collector did not capture message content)."""
    root = trace.root
    chats = list(trace.by_operation(genai.OP_CHAT))
    sources = [
        root.genai.input_messages if root else "",
        *(c.genai.input_messages for c in chats[:1]),
    ]
    return next((text for source in sources if (text := _last_text(source, "user"))), "")


def _turn_input(trace: Trace, user: str) -> dict[str, Any]:
    """An item's input: the user's turn, its conversation and its start (turn order)."""
    root = trace.root
    conversation = next(
        (s.genai.conversation_id for s in trace.spans if s.genai.conversation_id), ""
    )
    return {"user": user, "conversation_id": conversation, "start_ns": root.start_ns if root else 0}


def _service_slice(trace: Trace) -> dict[str, str]:
    root = trace.root
    return {"service": root.service_name} if root is not None and root.service_name else {}


def called_tools(trace: Trace) -> list[dict[str, Any]]:
    """The tool calls a trace shows, in execution order: `{"name", "args"}` (arguments
    that were not captured, or not a JSON object, read as `{}`)."""
    return [
        {"name": s.genai.tool_name, "args": _json_object(s.genai.tool_arguments)}
        for s in trace.by_operation(genai.OP_EXECUTE_TOOL)
    ]


def item_from_trace(trace: Trace) -> DatasetItem:
    """A golden dataset item from a stored trace: the user's message and conversation as
    input, the final answer as reference, the executed tool calls as expected calls."""
    chats = list(trace.by_operation(genai.OP_CHAT))
    calls = called_tools(trace)
    answer = _last_text(chats[-1].genai.output_messages, "assistant") if chats else ""
    slices = _service_slice(trace)
    if calls:
        slices["tool"] = calls[0]["name"]
    return DatasetItem(
        item_id=f"trace-{trace.trace_id}",
        input=_turn_input(trace, user_message(trace)),
        reference_answer=answer or None,
        expected_tool_calls=calls,
        slices=slices,
        source_trace_id=trace.trace_id,
    )


Fired = list[tuple[str, str]]
"""The violations the realtime plane raised on one trace: (detector code, span id)."""


def fired_violations(store: Store, trace_ids: Sequence[str]) -> dict[str, Fired]:
    """Per trace, the violation alerts stored for it (table `alerts`), by code."""
    if not trace_ids:
        return {}
    fired: dict[str, Fired] = {}
    for trace_id, code, span_id in stored_alerts.violations_of(store, trace_ids):
        fired.setdefault(trace_id, []).append((code, span_id))
    return fired


def regression_item(
    trace: Trace,
    fired: Fired,
    expected_calls: Sequence[dict[str, Any]] = (),
    forbid: Sequence[str] = (),
    user: str | None = None,
) -> DatasetItem:
    """A regression item from a failing trace: the trace as evidence, the user's input
    (`user`, else the captured message), and the lesson as its checks (`lesson_checks`):
    the codes that fired stay quiet, and the calls the findings point at (plus the tools in
    `forbid`) are not made. Expected calls only when given. DatasetError when the user's input is
    unknown or there is nothing to check."""
    text = user if user is not None else user_message(trace)
    problems = []
    if not text:
        problems.append(
            f"trace {trace.trace_id}: the user's message was not captured (start the collector "
            "with --capture-messages) and none was given"
        )
    tools = {s.span_id: s.genai.tool_name for s in trace.by_operation(genai.OP_EXECUTE_TOOL)}
    offending = [tools[span_id] for _, span_id in fired if span_id in tools]
    codes = sorted({code for code, _ in fired})
    checks = lesson_checks(codes, [*offending, *forbid])
    if not (checks or expected_calls):
        problems.append(
            f"trace {trace.trace_id}: no violation alert fired on it and no forbidden tool or "
            "expected call was given: the item would check nothing"
        )
    if problems:
        raise DatasetError(problems)
    return DatasetItem(
        item_id=f"trace-{trace.trace_id}",
        input=_turn_input(trace, text),
        expected_tool_calls=list(expected_calls),
        slices=_service_slice(trace),
        source_trace_id=trace.trace_id,
        tags=["regression", *codes],
        checks=checks,
    )


def items_from_traces(
    store: Store, where: str, limit: int | None = None, kind: str = "golden"
) -> tuple[list[DatasetItem], list[str]]:
    """Items from the stored traces that have a span matching `where` (read-only query),
    and the problems of the traces left out. Golden (or any non-regression) items expect
    what the trace did; regression items are `regression_item`s, and a trace without a
    lesson to learn is left out with its problem."""
    traces = load_traces(store, find_trace_ids(store, where, limit))
    if kind != "regression":
        return [item_from_trace(trace) for trace in traces], []
    fired = fired_violations(store, [trace.trace_id for trace in traces])
    items, skipped = [], []
    for trace in traces:
        try:
            items.append(regression_item(trace, fired.get(trace.trace_id, [])))
        except DatasetError as exc:
            skipped += exc.problems
    return items, skipped


def conversation_order(items: Sequence[DatasetItem]) -> list[DatasetItem]:
    """Items as conversations: grouped by conversation id, each in turn (start) order."""

    def key(item: DatasetItem) -> tuple[str, int, str]:
        start = item.input.get("start_ns", 0) if isinstance(item.input, dict) else 0
        return (item.conversation_id, int(start or 0), item.item_id)

    return sorted(items, key=key)


def triage(
    store: Store,
    trace_id: str,
    to: str,
    owner: str,
    expected_calls: Sequence[dict[str, Any]] = (),
    forbid: Sequence[str] = (),
    user: str | None = None,
) -> DatasetInfo:
    """Add the stored trace `trace_id` as a `regression_item` to the draft of regression
    dataset `to` (created as a `regression` dataset when it does not exist yet)."""
    traces = load_traces(store, [trace_id])
    if not traces:
        raise DatasetError([f"trace {trace_id!r}: not in the store"])
    fired = fired_violations(store, [trace_id]).get(trace_id, [])
    item = regression_item(traces[0], fired, expected_calls, forbid, user)
    datasets = Datasets(store)
    name, _ = parse_ref(to)
    versions = datasets.versions(name)
    if not versions or versions[-1].status == PUBLISHED:
        datasets.create(name, versions[-1].kind if versions else "regression", owner)
    return datasets.add(name, [item])


def _messages(text: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(text) if text else []
    except json.JSONDecodeError:
        return []
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _last_text(messages_json: str, role: str) -> str:
    """Text of the last `role` message (GenAI parts or OpenAI `content`)."""
    for message in reversed(_messages(messages_json)):
        if message.get("role") != role:
            continue
        if isinstance(message.get("content"), str):
            return message["content"]
        parts = message.get("parts") or []
        return "".join(
            p.get("content", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
