"""Settings documented once, at their pydantic models: the command line's help texts and
the configuration tables of docs/collector.md, docs/realtime.md and the other docs pages are
rendered from the models' defaults and field descriptions.

`python -m pathgrade.cli.reference --write` rewrites the tables between their markers,
the collector's default allow-list in docs/collector.md, docs/layout.md's folder table from
the layering rules (`cli.layout`) (and docs/detectors.md from the detector registry);
without `--write` it names the files that differ and exits 1.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pathgrade.batch_plane.edge.simulation_config import SimulationConfig
from pathgrade.batch_plane.export.config import ExportConfig
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.cli.layout import layout_table
from pathgrade.cli.model_flags import shown
from pathgrade.collector.config import CollectorConfig
from pathgrade.detectors.catalogue import render as render_catalogue
from pathgrade.detectors.monitor_policy import (
    BurnWindow,
    DetectorRateMonitor,
    MonitorsPolicy,
    ObjectiveMonitor,
    ScoreMonitor,
)
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.schemas import allowed_keys, genai_versions
from pathgrade.stack.alert_lines import AlertLineSettings
from pathgrade.stack.options import StackOptions
from pathgrade.web.options import UiOptions


def allowed_keys_list() -> str:
    """The default allow-list as Markdown (docs/collector.md)."""
    lines = []
    for group in allowed_keys.GROUPS:
        entries = sorted(group.keys) + [f"{prefix}*" for prefix in group.prefixes]
        lines.append(f"- {group.source}: " + ", ".join(f"`{e}`" for e in entries))
    for key, members in sorted(allowed_keys.ALLOWED_MEMBERS.items()):
        named = ", ".join(f"`{m}`" for m in sorted(members))
        lines.append(f"- `{key}` (a JSON object): only its members {named}")
    identifiers = ", ".join(f"`{k}`" for k in sorted(allowed_keys.IDENTIFIER_KEYS))
    lines.append(
        f"- identifiers among them (a fingerprint when scrubbing would change them): {identifiers}"
    )
    return "\n".join(lines)


def versions_table() -> str:
    """`genai_versions.VERSIONS` as the markdown table of docs/collector.md."""
    rows = ["| version | kind | old name | new name | how pathgrade reads it |",
            "|---|---|---|---|---|"]  # fmt: skip
    for version in genai_versions.VERSIONS:
        for change in version.changes:
            old = f"`{change.old}`" if change.old else "(added)"
            new = f"`{change.new}`" if change.new else "(removed)"
            rows.append(f"| {version.version} | {change.kind} | {old} | {new} | {change.reading} |")
    sources = [f"- {v.version}: {v.source}" for v in genai_versions.VERSIONS]
    return "\n".join([*rows, "", *sources])


MIB, GIB = 1 << 20, 1 << 30
TABLES: dict[str, dict[str, tuple[type[BaseModel], tuple[str, ...]]]] = {
    "docs/collector.md": {"collector-config": (CollectorConfig, ())},
    "docs/realtime.md": {
        "realtime-config": (RealtimeConfig, ("bootstrap_servers",)),
        "alert-lines": (AlertLineSettings, ()),
    },
    "docs/stack.md": {
        "stack-options": (StackOptions, ()),
        "export-config": (ExportConfig, ()),
    },
    "docs/edge.md": {"simulation-config": (SimulationConfig, ())},
    "docs/scoring.md": {
        "judge-endpoint": (JudgeEndpoint, ()),
        "online-scorer-config": (OnlineScorerConfig, ("bootstrap_servers",)),
    },
    "docs/ui.md": {"ui-options": (UiOptions, ())},
    "docs/monitors.md": {
        "monitors": (MonitorsPolicy, ()),
        "objective": (ObjectiveMonitor, ()),
        "burn-window": (BurnWindow, ()),
        "detector-rate": (DetectorRateMonitor, ()),
        "score": (ScoreMonitor, ()),
    },
}
"""File -> marker -> (the model its table documents, fields left out: set by a flag)."""
GENERATED = {"docs/detectors.md": render_catalogue}
"""Files rendered whole."""
SECTIONS: dict[str, dict[str, Callable[[], str]]] = {
    "docs/collector.md": {"allowed-keys": allowed_keys_list, "genai-versions": versions_table},
    "docs/layout.md": {"layout": layout_table},
}
"""File -> marker -> the function rendering the text between its markers."""


def config_table(model: type[BaseModel], skip: tuple[str, ...] = ()) -> str:
    """A Markdown table of `model`'s fields (nested models as dotted keys)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{key}` | {default} | {text} |" for key, default, text in _rows(model, "", skip)]
    return "\n".join(rows)


def _rows(model: type[BaseModel], prefix: str, skip: tuple[str, ...]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            key = f"{prefix}{name}"
            rows.append((key, f"the `{key}.*` keys", (info.description or "").strip()))
            rows += _rows(nested, f"{key}.", ())
            continue
        rows.append((f"{prefix}{name}", _default_cell(info), (info.description or "").strip()))
    return rows


def _default_cell(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    cell = f"`{shown(value)}`" if value is not None else "none"
    if isinstance(value, int) and not isinstance(value, bool) and value >= MIB and value % MIB == 0:
        cell += f" ({value // GIB} GiB)" if value % GIB == 0 else f" ({value // MIB} MiB)"
    return cell


def render_tables(text: str, tables: dict[str, tuple[type[BaseModel], tuple[str, ...]]]) -> str:
    """`text` with the table between each `<!-- generated: MARKER -->` and
    `<!-- end generated -->` pair rendered anew; ValueError when a marker is missing."""
    for marker, (model, skip) in tables.items():
        text = render_marked(text, marker, config_table(model, skip))
    return text


def render_marked(text: str, marker: str, content: str) -> str:
    """`text` with `content` between `<!-- generated: MARKER ... -->` and the next
    `<!-- end generated -->`; ValueError when the marker is missing."""
    pattern = re.compile(
        rf"(<!-- generated: {re.escape(marker)} [^\n]*-->\n).*?(<!-- end generated -->)", re.S
    )
    if not pattern.search(text):
        raise ValueError(f"marker {marker!r} not found")
    return pattern.sub(lambda m: m.group(1) + content + "\n" + m.group(2), text)


def rendered(root: Path) -> dict[str, str]:
    """Path (relative to the repository `root`) -> the text it should hold."""
    files = {path: render() for path, render in GENERATED.items()}
    for path, tables in TABLES.items():
        files[path] = render_tables((root / path).read_text(encoding="utf-8"), tables)
    for path, sections in SECTIONS.items():
        text = files.get(path) or (root / path).read_text(encoding="utf-8")
        for marker, render in sections.items():
            text = render_marked(text, marker, render())
        files[path] = text
    return files


def main(argv: list[str] | None = None) -> int:
    """Check (or `--write`) the generated documentation under `--root`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository")
    parser.add_argument("--write", action="store_true", help="rewrite the files that differ")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered(args.root).items():
        if (args.root / path).read_text(encoding="utf-8") != text:
            stale.append(path)
            if args.write:
                (args.root / path).write_text(text, encoding="utf-8")
    if stale and not args.write:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
