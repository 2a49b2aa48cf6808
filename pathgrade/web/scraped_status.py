"""The production UI's health: the boxes' own `/metrics` (Prometheus text, as
`pathgrade.stack.metrics` writes it) read back into the status snapshot `pathgrade up`
takes, so the health page and the stopped-pipeline banner work the same on both.

Each URL is one box; the box's kind comes from its metric names
(`pathgrade_<process>_<counter>`). Scrapes are cached for `every_s`, so two snapshots a
page compares are that far apart. A URL that does not answer is listed as unreachable.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from pathgrade.web.metric_names import GAUGES

PROCESSES = ("collector", "store_writer", "realtime", "scorer", "broker")
_SAMPLE = re.compile(r"^pathgrade_([a-z0-9_]+?)(\{[^}]*\})? (\S+)$")
TIMEOUT_S = 3.0


def parse_metrics(text: str) -> dict[str, dict[str, float]]:
    """process -> counter -> value from Prometheus text (labels ignored; one box)."""
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if not match:
            continue
        name, value = match[1], match[3]
        process = next((p for p in PROCESSES if name.startswith(p + "_")), None)
        if process is None:
            continue
        counter = name[len(process) + 1 :]
        if counter.endswith("_total") and counter[: -len("_total")] not in GAUGES:
            counter = counter[: -len("_total")]
        try:
            number = float(value)
        except ValueError:
            continue
        found.setdefault(process, {})[counter] = int(number) if number.is_integer() else number
    return found


def _added(into: dict[str, float], counters: dict[str, float]) -> dict[str, float]:
    return {key: into.get(key, 0) + counters.get(key, 0) for key in {*into, *counters}}


class ScrapedStatus:
    """A status source (`HealthWatch`) built from the boxes' metrics URLs."""

    def __init__(self, urls: list[str], every_s: float = 10.0) -> None:
        self.urls = urls
        self.every_s = every_s
        self._cached: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> dict[str, Any] | None:
        if not self.urls:
            return None
        with self._lock:
            if self._cached is None or time.time() - self._cached["snapshot"]["taken_at"] >= (
                self.every_s
            ):
                self._cached = self._scrape()
            return self._cached

    def _scrape(self) -> dict[str, Any]:
        snapshot: dict[str, Any] = {
            "taken_at": time.time(), "collector": None, "store_writer": {}, "realtime": [],
            "broker_rss_bytes": None, "unreachable": [],
        }  # fmt: skip
        for url in self.urls:
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                    boxes = parse_metrics(response.read().decode("utf-8", "replace"))
            except (urllib.error.URLError, OSError) as exc:
                snapshot["unreachable"].append(f"{url}: {getattr(exc, 'reason', exc)}")
                continue
            for process, counters in boxes.items():
                if process == "realtime":
                    snapshot["realtime"].append(counters)
                elif process in ("store_writer", "collector"):  # several boxes: summed
                    snapshot[process] = _added(snapshot[process] or {}, counters)
        line = f"scraped {len(self.urls) - len(snapshot['unreachable'])} of {len(self.urls)} boxes"
        return {"snapshot": snapshot, "line": line}
