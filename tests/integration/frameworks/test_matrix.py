"""The conformance matrix (issue 39): real agent frameworks, each with its own telemetry
unchanged (or the OpenInference / OpenLLMetry instrumentor for it), offline on a scripted
model, export with the official OTLP exporter to one `pathgrade up` stack on default
settings (nothing captured) whose policy names the tools' effects. Every framework runs
the same stories in four shapes (stories.SHAPES); for each shape, each failure story's
detector alerts and the clean turns raise no alert at all.

The frameworks' adapters run at once (`PATHGRADE_FRAMEWORKS_PARALLEL`, default 6, at a
time) against the one stack, and their alerts are awaited together: the module costs one
stack start, the slowest adapters and one quiet window, not the sum of them.

`PATHGRADE_RECORD_FRAMEWORKS=1` writes each framework's results to results/ (and the
run's wall time to results/run.json), from which
`python -m tests.integration.frameworks.matrix_doc --write` renders docs/frameworks.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pathgrade.detectors.policy import SectionBase

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.frameworks.environments import ENVIRONMENTS, Environment
from tests.integration.frameworks.scripted_model import ScriptedModel
from tests.integration.frameworks.stories import SHAPES, STORIES, policy_yaml
from tests.integration.test_facts import failed_tool_trace
from tests.integration.test_realtime import Webhook
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

RESULTS = Path(__file__).parent / "results"
RECORD = os.environ.get("PATHGRADE_RECORD_FRAMEWORKS") == "1"
ADAPTER_TIMEOUT_S = 600
ALERT_WAIT_S = 30
"""How long after a framework's traffic every failure's alert may take (a turn is due a
quiet window after it ended, about a second; a loaded CI machine adds a few)."""
REQUESTS_IN_POLICY = "requests" in SectionBase.model_fields
"""Whether this branch's policy has the `requests:` section (what a request for each write
looks like); without it the policy names only the tools' effects."""


@dataclass
class Stack:
    process: PathgradeProcess
    http_port: int
    webhook: Webhook
    model: ScriptedModel

    @property
    def otlp(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def alerts(self, trace_ids: set[str]) -> list[dict[str, Any]]:
        return [a for a in list(self.webhook.alerts) if a["trace_id"] in trace_ids]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`pathgrade up` on default settings with the matrix's policy, alerts to a webhook,
    and the scripted model."""
    data_dir = tmp_path_factory.mktemp("frameworks")
    policy = data_dir.parent / "frameworks-policy.yaml"
    prefixes = {e.service: e.tool_prefix for e in ENVIRONMENTS.values() if e.tool_prefix}
    policy.write_text(policy_yaml(REQUESTS_IN_POLICY, prefixes))
    webhook = Webhook()
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    process, _, http_port = start_stack(
        data_dir, "--policy", str(policy), "--alert-webhook", webhook.url
    )
    with ScriptedModel() as model:
        yield Stack(process, http_port, webhook, model)
    try:
        assert process.terminate() == 0, process.output
    finally:
        webhook.shutdown()


@dataclass
class Outcome:
    """One framework's run through every shape and the alerts its traces raised."""

    env: Environment
    record: dict[str, Any]
    alerts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def trace_ids(self) -> set[str]:
        return {t["trace_id"] for shape in self.record["shapes"].values() for t in shape}

    def all_problems(self) -> list[str]:
        return [p for shape in self.record["shapes"] for p in self.problems(shape)]

    def runs(self, shape: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for trace in self.record["shapes"][shape]:
            for run in trace["runs"]:
                yield trace, run

    def alerts_of(self, trace: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
        """The alerts of `run`: on one of its spans, else in its turn (the alert's turn
        span is one of its spans), or on its trace when the trace holds no other run or
        neither span is any run's (counted against each).

        The turn decides only when the alert's own span is no run's: a recorder can miss a
        span the framework exported (one CI run recorded the write span of LangGraph under
        OpenInference with an id that was never exported, and the stored write span with
        an id that was never recorded)."""
        mine = set(run["span_ids"])
        anyone = {s for r in trace["runs"] for s in r["span_ids"]}

        def located(alert: dict[str, Any]) -> str:
            span = str(alert["span_id"])
            return span if span in anyone else str(alert.get("turn_span_id") or "")

        return [
            a
            for a in self.alerts
            if a["trace_id"] == trace["trace_id"]
            and (located(a) in mine or len(trace["runs"]) == 1 or located(a) not in anyone)
        ]

    def problems(self, shape: str) -> list[str]:
        """What breaks the matrix's promise in `shape`: a failure whose detector did not
        alert, a clean turn with any alert, or a clean turn of a shape where nothing
        alerted at all (no sign its turns were graded)."""
        found = []
        graded = False
        for trace, run in self.runs(shape):
            story = STORIES[run["story"]]
            alerts = self.alerts_of(trace, run)
            fired = {a["code"] for a in alerts if a["kind"] == "violation"}
            graded = graded or bool(alerts)
            where = f"{run['story']} (trace {trace['trace_id']})"
            found += [
                f"{where}: {code} did not alert" for code in story.expected if code not in fired
            ]
            if story.clean:
                found += [
                    f"{where}: clean turn alerted {a['code']} {a['kind']}: {a['reason']}"
                    for a in alerts
                ]
        if not graded:
            found += [
                f"{run['story']} (trace {trace['trace_id']}): no turn of this shape alerted, "
                "so nothing shows this clean turn was graded"
                for trace, run in self.runs(shape)
                if STORIES[run["story"]].clean
            ]
        return found

    def summary(self) -> dict[str, Any]:
        """The record with, per run, the alerts it raised (code and kind)."""
        shapes = {
            shape: [
                {
                    **run,
                    "span_ids": len(run["span_ids"]),
                    "alerts": sorted({f"{a['code']} {a['kind']}" for a in self.alerts_of(t, run)}),
                }
                for t, run in self.runs(shape)
            ]
            for shape in self.record["shapes"]
        }
        problems = {shape: self.problems(shape) for shape in self.record["shapes"]}
        gaps = {a["code"]: str(a["details"].get("close", ""))
                for a in self.alerts if a["kind"] == "cannot_decide"}  # fmt: skip
        reasons = {f"{a['code']} {a['kind']}": a["reason"] for a in self.alerts}
        return {**self.record, "slug": self.env.slug, "shapes": shapes, "problems": problems,
                "gaps": gaps, "reasons": reasons,
                "requests_in_policy": REQUESTS_IN_POLICY}  # fmt: skip


CANNOT_PASS: dict[tuple[str, str], tuple[str, bool]] = {}
"""Framework x shape cells that cannot pass yet, each mapped to (why, strict): an expected
failure naming why (never counted as passing); a strict one fails once it passes, a
non-strict one may pass in some runs (one whose failure depends on which turn a
once-per-window coverage alert lands on). None today: every cell of the matrix passes."""
PARALLEL = int(os.environ.get("PATHGRADE_FRAMEWORKS_PARALLEL", "6"))
"""How many frameworks' adapters run at once against the stack (each is a process that
mostly waits: on the scripted model, the exporter, its conversation's pauses)."""


def selected_slugs(session: pytest.Session) -> list[str]:
    """The frameworks of this module's selected tests, in their order."""
    slugs = [
        item.callspec.params["slug"]
        for item in session.items
        if item.module is not None and item.module.__name__ == __name__
        and hasattr(item, "callspec")
    ]  # fmt: skip
    return list(dict.fromkeys(slugs))


@pytest.fixture(scope="module")
def outcomes(
    stack: Stack, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome | str]:
    """Every selected framework through every shape, at most PARALLEL adapters at a time,
    then their alerts once each failure alerted (or ALERT_WAIT_S passed) and a trace sent
    after all of them alerted too (one consumer evaluates turns in the order they went
    quiet). A framework whose adapter failed maps to why (each of its shapes fails so)."""
    slugs = selected_slugs(request.session)
    tmp_dir = tmp_path_factory.mktemp("adapters")
    started = time.monotonic()

    def attempt(slug: str) -> Outcome | str:
        try:
            return run_adapter(stack, ENVIRONMENTS[slug], tmp_dir)
        except Exception as error:  # the framework could not run: each shape's test says so
            return f"{slug} could not run: {error}"

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        found = dict(zip(slugs, pool.map(attempt, slugs), strict=True))
    ran = [o for o in found.values() if isinstance(o, Outcome)]
    traces = {t["trace_id"] for o in ran for shape in o.record["shapes"].values() for t in shape}

    def all_failures_alerted() -> bool:
        alerts = stack.alerts(traces)
        for result in ran:
            result.alerts = [a for a in alerts if a["trace_id"] in result.trace_ids]
        return not any("did not alert" in p for o in ran for p in o.all_problems())

    with contextlib.suppress(AssertionError):  # the problems name what did not alert
        wait_until(all_failures_alerted, timeout_s=ALERT_WAIT_S)
    sentinel = failed_tool_trace(stack.otlp)
    wait_until(lambda: stack.alerts({sentinel}), timeout_s=60)
    all_failures_alerted()
    if RECORD:
        RESULTS.mkdir(exist_ok=True)
        for result in ran:
            path = RESULTS / f"{result.env.slug}.json"
            path.write_text(json.dumps(result.summary(), indent=1, sort_keys=True) + "\n")
        run = {"frameworks": len(slugs), "parallel": PARALLEL, "cpus": os.cpu_count(),
               "wall_s": round(time.monotonic() - started, 1)}  # fmt: skip
        (RESULTS / "run.json").write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
    return found


def run_adapter(stack: Stack, env: Environment, tmp_dir: Path) -> Outcome:
    """Install if needed and run the framework's adapter: its traffic and record."""
    python, install_s = env.python()
    out = tmp_dir / f"{env.slug}.json"
    done = subprocess.run(
        [
            python,
            "-m",
            env.module,
            "--otlp",
            stack.otlp,
            "--model-url",
            stack.model.url,
            "--service",
            env.service,
            "--out",
            str(out),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=ADAPTER_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the adapter exited {done.returncode}:\n{done.stderr[-5000:]}")
    record = {**json.loads(out.read_text()), "install_s": round(install_s, 1)}
    return Outcome(env, record)


@pytest.mark.timeout(ADAPTER_TIMEOUT_S + 300)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("slug", list(ENVIRONMENTS))
def test_failures_alert_and_clean_turns_do_not(
    outcomes: dict[str, Outcome | str], slug: str, shape: str
) -> None:
    result = outcomes[slug]
    if isinstance(result, str):
        pytest.fail(result)
    own = [
        k for e in result.record["emitted"] for k in e["attributes"] if k.startswith("pathgrade.")
    ]
    assert own == [], "the app and the framework set no pathgrade.* attribute"
    problems = result.problems(shape)
    known = CANNOT_PASS.get((slug, shape))
    if known is not None:
        why, strict = known
        assert problems or not strict, f"{slug} in {shape} passes now: remove it from CANNOT_PASS"
        pytest.xfail(f"{why}:\n" + "\n".join(problems or ["(not in this run)"]))
    assert not problems, f"{slug} in {shape}:\n" + "\n".join(problems)
