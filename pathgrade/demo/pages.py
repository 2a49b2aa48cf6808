"""The demo's pages: what `pathgrade up --demo` puts on every page of the browser UI in its
first minute (about half a minute after the stack is up), beside its live traffic.

It runs pathgrade's own commands as a user would (`PageSeeder`), each in a process of its
own that inherits the seeding threads' lowest priority, once the live traffic raised its
first alert, in three chains side by side (1-3, 4, 5):

1. `dataset import` the seeded-defect agent's golden dataset (examples/seeded_defects),
   published;
2. `eval` its suite with the healthy build and with the `stale_index` build;
3. `gate` the defect against the healthy build: it fails on `reference_match`, with the
   row's bootstrap interval and the two cases that flipped;
4. send one prompt-injection turn of the demo agent, wait for its alert, `triage` it into
   the regression dataset and publish that;
5. `edge run` the car-dealer graph (examples/car_dealer; the recruitment graph where
   LangGraph is not installed) and write its `edge report` into the data directory.

The live traffic fills the traces, conversations, alerts, review and health pages. What
the demo makes is marked as demo data (`schemas.demo_marks`: its spans carry the demo's
resource attribute, its datasets are owned by `pathgrade-demo`); `pathgrade demo clean`
deletes it. A directory that already holds the demo's datasets is not seeded again.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pathgrade.batch_plane.agents.span_export import exporter_for_url
from pathgrade.demo.scenarios import SCENARIO_PROMPT_INJECTION, TurnPlan, iter_turns
from pathgrade.demo.sender import send_demo_traces
from pathgrade.schemas.demo_marks import DEMO_OWNER, DEMO_RESOURCE_KEY, DEMO_RESOURCE_VALUE

DEMO_DIR = "demo"
"""The data directory's folder of the demo's files (its seeding log, the EDGE report)."""
GOLDEN = "golden/support-seeded"  # the name examples/seeded_defects/suite.yaml evaluates
REGRESSION = "regression/support-demo"
BASELINE, CANDIDATE = "healthy", "stale_index"
FIRST_ALERT_WAIT_S = 20.0
"""The seeding waits for the live traffic's first alert this long at most before it starts."""
STORED_WAIT_S = 60.0
"""How long the seeding waits for what it sent to be stored (and the triaged turn's alert)."""
TRIAGE_SEED = 43
"""Seed of the demo stream the triaged turn is drawn from: another than the live traffic's,
so its conversation is its own."""
_GATE_ID = re.compile(r"recorded as (gate-[0-9a-f]+)")
_AGENT_TURNS = re.compile(r"(\d+) agent turns")


def examples_dir() -> Path | None:
    """The repository's examples folder: beside the source tree (a clone installed with
    `pip install -e .`), else in the working directory; None when neither has it."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "examples" / "seeded_defects" / "suite.yaml").is_file():
            return root / "examples"
    return None


def demo_files(data_dir: Path) -> Path | None:
    """The demo's folder in `data_dir`, None when there is none."""
    folder = data_dir / DEMO_DIR
    return folder if folder.is_dir() else None


@dataclass(frozen=True)
class DemoSite:
    """Where the demo's pages are made: the stack's data directory, collector (OTLP/HTTP)
    and browser UI, the identity of the demo's traffic (a collector token and the tenant
    it stands for) and the examples folder."""

    data_dir: Path
    otlp_url: str
    ui_url: str
    examples: Path
    tenant: str = "default"
    token: str | None = None

    @property
    def files(self) -> Path:
        return self.data_dir / DEMO_DIR


def banner(ui_url: str, data_dir: Path) -> list[str]:
    """The `up --demo` banner's lines naming each page and what the demo puts there."""
    return [
        "Demo pages (filled in the background, about half a minute after this):",
        f"  traces      {ui_url}/traces    live support-agent turns, 2 a second",
        f"  alerts      {ui_url}/alerts    the seven failure stories and their detectors",
        f"  runs, gates {ui_url}/runs      seeded-defect suite: {BASELINE} vs {CANDIDATE}, "
        "a failing gate",
        f"  datasets    {ui_url}/datasets  {GOLDEN} and {REGRESSION} (a triaged failure)",
        f"  EDGE        {ui_url}/edge      the car-dealer graph's determinism report",
        f"  review      {ui_url}/review    flagged traces waiting for a label",
        f"  health      {ui_url}/health    every process and its delays",
        f"  clean up    pathgrade demo clean --data-dir {data_dir}  (with the stack stopped)",
    ]


class SeedingStopped(Exception):
    """The stack is stopping: the seeding ends where it is."""


class StepFailed(Exception):
    """A seeding command failed; the message says which and why."""


class StoredProgress(Protocol):
    """What the seeding reads of the stack's store to know where it is (the store room's
    `demo_rows.DemoProgress` over the stack's own store)."""

    def demo_datasets(self) -> int:
        """How many dataset versions the demo owns."""
        ...

    def alerts(self) -> int:
        """How many alerts are stored."""
        ...

    def violations_of(self, trace_id: str) -> int:
        """How many violations are stored for trace `trace_id`."""
        ...

    def roots_of_run(self, run_id: str) -> int:
        """How many root spans of run `run_id` are stored."""
        ...


@dataclass
class PageSeeder:
    """Runs the demo's commands against the stack at `site` (reading `stored`, the stack's
    own store, to wait for alerts), printing one line per page it fills with `out`, until
    done or `stop` is set."""

    site: DemoSite
    stored: StoredProgress
    stop: threading.Event
    out: Callable[[str], None]
    started: float = field(default_factory=time.monotonic)
    _log_lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        """Seed every page: three chains of commands side by side (the suite's runs and
        gate, the triaged regression item, the EDGE run); a failure or a stop is said in
        one line, never raised."""
        if self._seeded_before():
            self.out(
                "demo: this directory holds the demo's pages from an earlier run "
                f"(pathgrade demo clean --data-dir {self.site.data_dir} deletes them)"
            )
            return
        self.site.files.mkdir(parents=True, exist_ok=True)
        try:
            self._wait_for(self.stored.alerts, FIRST_ALERT_WAIT_S)
        except SeedingStopped:
            return
        chains = (self._datasets_and_gate, self._regression_item, self._edge_run)
        with ThreadPoolExecutor(len(chains), thread_name_prefix="demo-pages") as pool:
            done = list(pool.map(self._chain, chains))
        if all(done):
            self.out(
                f"demo: every page is populated ({time.monotonic() - self.started:.0f} s after "
                f"the stack was up); "
                f"commands and output in {self._log}"
            )

    def _chain(self, chain: Callable[[], None]) -> bool:
        """Run one chain of commands; whether it finished (a failure is said in a line)."""
        try:
            chain()
        except SeedingStopped:
            return False
        except StepFailed as exc:
            self.out(f"demo: {exc} (see {self._log}); the live traffic goes on")
            return False
        return True

    @property
    def _log(self) -> Path:
        return self.site.files / "seed.log"

    def _seeded_before(self) -> bool:
        return self.stored.demo_datasets() > 0

    def _datasets_and_gate(self) -> None:
        seeded = self.site.examples / "seeded_defects"
        self._pathgrade("dataset", "import", GOLDEN, str(seeded / "golden.jsonl"), "--publish",
                        "--owner", DEMO_OWNER, *self._store_args())  # fmt: skip
        self.out(f"demo: {GOLDEN} published: {self.site.ui_url}/datasets")
        runs = {}
        for build in (BASELINE, CANDIDATE):
            runs[build] = f"demo-{build.replace('_', '-')}-{os.urandom(3).hex()}"
            self._pathgrade("eval", str(seeded / "suite.yaml"),
                            "--agent", f"{seeded / 'agent.py'}:{build}", "--run-id", runs[build],
                            *self._traffic_args(), *self._store_args(),
                            service="seeded-support-agent")  # fmt: skip
        gated = self._pathgrade("gate", str(seeded / "suite.yaml"), "--candidate",
                                runs[CANDIDATE], "--baseline", runs[BASELINE],
                                *self._store_args(), expect=(0, 1))  # fmt: skip
        found = _GATE_ID.search(gated.stderr)
        page = f"/gates/{found[1]}" if found else "/runs"
        verdict = "FAILS" if gated.returncode else "passes"
        self.out(
            f"demo: the gate of {CANDIDATE} against {BASELINE} {verdict}: {self.site.ui_url}{page}"
        )

    def _regression_item(self) -> None:
        turn = _first_turn(SCENARIO_PROMPT_INJECTION)
        headers = {"authorization": f"Bearer {self.site.token}"} if self.site.token else None
        exporter = exporter_for_url(self.site.otlp_url, headers)
        sent = send_demo_traces(exporter, turns=[turn], destination=self.site.otlp_url)
        traced = sent.trace_ids[0]
        self._wait_for(
            lambda: self.stored.violations_of(traced),
            STORED_WAIT_S,
            f"the injected turn {traced} raised no alert in {STORED_WAIT_S:.0f} s",
        )
        self._pathgrade("triage", traced, "--to", REGRESSION, "--owner", DEMO_OWNER,
                        "--input", turn.user_text, *self._store_args())  # fmt: skip
        self._pathgrade("dataset", "publish", REGRESSION, *self._store_args())
        self.out(
            f"demo: {REGRESSION} published with the triaged trace {self.site.ui_url}/trace/{traced}"
        )

    def _edge_run(self) -> None:
        graph, agent, name = edge_example(self.site.examples)
        run_id = f"demo-edge-{os.urandom(3).hex()}"
        ran = self._pathgrade("edge", "run", str(graph), "--agent", agent, "--run-id", run_id,
                              *self._traffic_args(), service=name, data_dir=False)  # fmt: skip
        turns = _AGENT_TURNS.search(ran.stdout)
        roots = int(turns[1]) + 1 if turns else 1  # every turn's root, and the manifest
        self._wait_for(
            lambda: self.stored.roots_of_run(run_id) >= roots,
            STORED_WAIT_S,
            f"the EDGE run {run_id}'s traces were not stored in {STORED_WAIT_S:.0f} s",
        )
        report = self.site.files / "edge-report.html"
        self._pathgrade("edge", "report", run_id, "--out", str(report), *self._store_args())
        without = "" if name == "car-dealer" else " (the car-dealer graph needs LangGraph)"
        self.out(
            f"demo: EDGE run of the {name} graph{without}: {self.site.ui_url}/edge/{run_id} "
            f"(report {report})"
        )

    def _store_args(self) -> list[str]:
        return ["--tenant", self.site.tenant]

    def _traffic_args(self) -> list[str]:
        token = ["--token", self.site.token] if self.site.token else []
        return ["--otlp", self.site.otlp_url, *token]

    def _pathgrade(
        self,
        *args: str,
        service: str = "pathgrade-demo",
        expect: Sequence[int] = (0,),
        data_dir: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run `pathgrade ARGS` (on the stack's data directory), its spans marked as demo
        data under `service`; its output goes to the seeding log. StepFailed when its exit
        code is not one of `expect`, SeedingStopped (after ending it) on a stop."""
        command = [sys.executable, "-m", "pathgrade.cli", *args]
        if data_dir:
            command += ["--data-dir", str(self.site.data_dir)]
        marks = f"{DEMO_RESOURCE_KEY}={DEMO_RESOURCE_VALUE}"
        earlier = os.environ.get("OTEL_RESOURCE_ATTRIBUTES")
        env = {
            **os.environ,
            "OTEL_RESOURCE_ATTRIBUTES": f"{earlier},{marks}" if earlier else marks,
            "OTEL_SERVICE_NAME": service,
        }
        began = time.monotonic()
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            start_new_session=True,  # Ctrl-C reaches the stack, which ends it in order
        )  # fmt: skip
        stdout, stderr = ended(process, self.stop)
        done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        with self._log_lock, self._log.open("a") as log:
            log.write(
                f"$ pathgrade {' '.join(args)}\n{stdout}{stderr}(exit {done.returncode}, "
                f"{time.monotonic() - began:.1f} s, {began - self.started:.1f} s after the start)\n"
            )
        if done.returncode not in expect:
            last = (stderr.strip().splitlines() or ["no output"])[-1]
            raise StepFailed(f"`pathgrade {' '.join(args[:2])}` failed ({last})")
        return done

    def _wait_for(self, check: Callable[[], int], timeout_s: float, failure: str = "") -> None:
        """Poll `check` until it counts something; past `timeout_s`, StepFailed with
        `failure` (or go on, without one); SeedingStopped on a stop."""
        deadline = time.monotonic() + timeout_s
        while not check():
            if self.stop.wait(0.5):
                raise SeedingStopped
            if time.monotonic() >= deadline:
                if failure:
                    raise StepFailed(failure)
                return


def ended(process: subprocess.Popen[str], stop: threading.Event) -> tuple[str, str]:
    """The process's output once it ended; when `stop` is set first, end it and raise
    SeedingStopped."""
    while True:
        try:
            return process.communicate(timeout=0.5)
        except subprocess.TimeoutExpired:
            if stop.is_set():
                process.terminate()
                process.communicate(timeout=30)
                raise SeedingStopped from None


def _first_turn(scenario: str) -> TurnPlan:
    """The first turn of `scenario` in the demo stream of TRIAGE_SEED."""
    return next(turn for turn in iter_turns(TRIAGE_SEED) if turn.scenario == scenario)


def edge_example(examples: Path) -> tuple[Path, str, str]:
    """(graph, agent, name) of the EDGE run: the car-dealer LangGraph agent, or the
    recruitment agent (plain Python) where LangGraph is not installed."""
    if all(importlib.util.find_spec(name) for name in ("langgraph", "langchain_core")):
        dealer = examples / "car_dealer"
        return dealer / "graph.json", f"{dealer / 'agent.py'}:stochastic", "car-dealer"
    recruitment = examples / "recruitment"
    return (
        recruitment / "graph_constrained.json",
        f"{recruitment / 'agent.py'}:constrained",
        "recruitment",
    )
