"""docs/frameworks.md, rendered from the conformance matrix's recorded results
(results/<framework>.json, written by test_matrix.py with PATHGRADE_RECORD_FRAMEWORKS=1).

    python -m tests.integration.frameworks.matrix_doc --write

Without `--write` it exits 1 when docs/frameworks.md differs from the rendering.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.integration.frameworks.environments import ENVIRONMENTS
from tests.integration.frameworks.stories import REQUESTS, SHAPES, STORIES, WRITES

RESULTS = Path(__file__).parent / "results"
DOC = Path(__file__).resolve().parents[3] / "docs" / "frameworks.md"

TOOL_SPANS = {"execute_tool", "TOOL"}
MODEL_SPANS = {"chat", "generate_content", "LLM"}
SIGNALS: dict[str, tuple[set[str], tuple[str, ...]]] = {
    "tool arguments": (TOOL_SPANS, ("gen_ai.tool.call.arguments", "traceloop.entity.input",
                                    "input.value", "gen_ai.tool.message")),
    "tool call ids": (TOOL_SPANS, ("gen_ai.tool.call.id",)),
    "token usage": (MODEL_SPANS, ("gen_ai.usage.input_tokens", "llm.token_count.prompt")),
    "messages": (MODEL_SPANS, ("gen_ai.input.messages", "llm.input_messages.N.message.role",
                               "gen_ai.user.message")),
    "final answer": (MODEL_SPANS, ("gen_ai.output.messages", "llm.output_messages.N.message.role",
                                   "gen_ai.choice")),
}  # fmt: skip
"""Where each signal lives (kinds of span) and the keys that carry it, as attributes or
span events, in the GenAI conventions, OpenLLMetry and OpenInference (indexes folded to
N)."""
APP_SPANS = {"POST", "support"}
"""Span kinds of the app's own spans (server and session), left out of what a framework
emits."""


def load() -> list[dict[str, Any]]:
    """The recorded results, in the matrix's order."""
    found = {p.stem: json.loads(p.read_text()) for p in RESULTS.glob("*.json")}
    return [found[slug] for slug in ENVIRONMENTS if slug in found]


def load_run() -> dict[str, Any]:
    """The recorded run's figures (wall time, adapters at a time, CPUs); {} when none."""
    path = RESULTS / "run.json"
    return json.loads(path.read_text()) if path.exists() else {}


def framework_spans(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in result["emitted"] if e["kind"] not in APP_SPANS]


def emits(result: dict[str, Any]) -> str:
    """The framework's kinds of span with counts, and which signals they carry."""
    spans = framework_spans(result)
    kinds = ", ".join(f"`{e['kind']}` x{e['count']}" for e in spans)
    present = [signal for signal, (where, keys) in SIGNALS.items()
               if any(set(keys) & {*e["attributes"], *e["events"]}
                      for e in spans if e["kind"] in where)]  # fmt: skip
    absent = [s for s in SIGNALS if s not in present]
    return f"{kinds}; carries {', '.join(present) or 'none'}" + (
        f"; lacks {', '.join(absent)}" if absent else ""
    )


def decision_lands(result: dict[str, Any]) -> str:
    """Where the app's `gen_ai.tool.call.decision` event landed: the span current in the
    tool function."""
    kinds = [e["kind"] for e in result["emitted"] if "gen_ai.tool.call.decision" in e["events"]]
    framework = [k for k in kinds if k not in APP_SPANS]
    if framework:
        return f"on the tool span (`{'`, `'.join(framework)}`)"
    if kinds:
        return "on the app's span, not the tool's (the tool runs outside the tool span's context)"
    return "nowhere (the tool runs with no span current)"


def fired(result: dict[str, Any], shape: str) -> dict[str, set[str]]:
    """Per story, the violation codes its runs raised in `shape`."""
    by_story: dict[str, set[str]] = {}
    for run in result["shapes"].get(shape, []):
        codes = {a.split()[0] for a in run["alerts"] if a.endswith("violation")}
        by_story.setdefault(run["story"], set()).update(codes)
    return by_story


def reads(result: dict[str, Any]) -> str:
    """The failures pathgrade detected from this framework's spans (any shape)."""
    detected = set()
    for shape in result["shapes"]:
        for story, codes in fired(result, shape).items():
            detected |= set(STORIES[story].expected) & codes
    expected = {c for s in STORIES.values() for c in s.expected}
    return f"detects {', '.join(sorted(detected)) or 'none'}" + (
        f"; not {', '.join(sorted(expected - detected))}" if expected - detected else ""
    )


def blind(result: dict[str, Any]) -> str:
    """What pathgrade could not decide, with how to close it, what the app must do for
    the instrumentation, and the open problems."""
    reasons = result.get("reasons", {})
    parts = [f"{code} cannot decide ({close or reasons.get(f'{code} cannot_decide')})"
             for code, close in sorted(result.get("gaps", {}).items())]  # fmt: skip
    if result.get("current_span"):
        parts.append(
            "no span is current while a tool runs, so the app's code reaches the tool's span "
            f"through `{result['current_span']}()`: the approval gate records its "
            "`gen_ai.tool.call.decision` there (with the OpenTelemetry current span it is lost "
            "when the app has no span of its own)"
        )
    failing = sorted(shape for shape, problems in result["problems"].items() if problems)
    if failing:
        parts.append(f"shapes not yet passing: {', '.join(failing)}")
    return "; ".join(parts) or "nothing"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def matrix(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| framework | version | instrumentation | what it emits | what pathgrade reads |"
        " what it cannot see, and how to close it |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        version = ", ".join(f"{name} {v}" for name, v in r["versions"].items())
        notes = "".join(f"; {n}" for n in r.get("notes", []))
        lines.append(
            "| " + " | ".join(cell(x) for x in (
                r["framework"], version, r["instrumentation"] + notes,
                f"{emits(r)}; decision event {decision_lands(r)}", reads(r), blind(r),
            )) + " |"
        )  # fmt: skip
    return lines


def outcomes(results: list[dict[str, Any]]) -> list[str]:
    """Per framework and shape: each story's alerts, marked pass or fail."""
    lines = []
    for r in results:
        lines += [f"### {r['framework']}", "",
                  f"Installed in {r['install_s']} s (0: cached), ran every shape in "
                  f"{r['run_s']} s.", "",
                  "| shape | " + " | ".join(STORIES) + " |",
                  "|---|" + "---|" * len(STORIES)]  # fmt: skip
        for shape in SHAPES:
            runs: dict[str, list[str]] = {}
            for run in r["shapes"].get(shape, []):
                runs.setdefault(run["story"], []).extend(run["alerts"])
            problems = r["problems"].get(shape, [])
            row = []
            for story in STORIES:
                if story not in runs:
                    row.append("")
                    continue
                bad = any(p.startswith(f"{story} ") for p in problems)
                codes = sorted({a.replace(" violation", "").replace(" cannot_decide", "?")
                                for a in runs[story]})  # fmt: skip
                row.append(("FAIL " if bad else "ok ") + (" ".join(codes) or "-"))
            lines.append(f"| {shape} | " + " | ".join(row) + " |")
        lines.append("")
    return lines


def render(results: list[dict[str, Any]]) -> str:
    """The whole docs/frameworks.md."""
    run = load_run()
    stories = ["| story | the user says | the scripted model | must raise |", "|---|---|---|---|"]
    for s in STORIES.values():
        calls = ", ".join(c.tool for c in s.calls)
        extra = f"; the app's gate records `{s.decision}`" if s.decision else ""
        stories.append(f"| `{s.name}` | {s.user_text} | calls {calls}, answers{extra} | "
                       f"{', '.join(s.expected) or 'no alert at all'} |")  # fmt: skip
    shapes = [f"- `{name}`: " + "; ".join(" + ".join(t) for t in traces)
              for name, traces in SHAPES.items()]  # fmt: skip
    recorded = {r.get("requests_in_policy") for r in results}
    requests = ", ".join(f"`{t}` {p[0]}" for t, p in REQUESTS.items())
    return "\n".join([
        "# Framework conformance matrix",
        "",
        "<!-- Generated from tests/integration/frameworks/results/*.json: run the matrix with",
        "     PATHGRADE_RECORD_FRAMEWORKS=1, then",
        "     `python -m tests.integration.frameworks.matrix_doc --write`. -->",
        "",
        "Real agent frameworks, each with its own OpenTelemetry instrumentation unchanged (or",
        "the OpenInference / OpenLLMetry instrumentor for it), run offline against a scripted",
        "model and export with the official OTLP exporter to one `pathgrade up` stack on",
        "default settings (nothing captured). The app around each agent is what a real",
        "service writes: the official SDK, an HTTP server span whose parent is remote (a W3C",
        "`traceparent` from upstream), the identity as `user.id` on that span (or, with no",
        "server span, as baggage copied onto the framework's spans by the official baggage",
        "span processor), and an approval gate that records its decision as the",
        "`gen_ai.tool.call.decision` event (GenAI conventions pull request 535, not merged)",
        "on the span current in the tool. Neither the app nor the framework sets any",
        "`pathgrade.*` attribute: no `pathgrade.turn.kind`, no `pathgrade.confirmed_action`.",
        "",
        f"The policy names the tools' effects (writes {', '.join(WRITES)}; irreversible",
        "`reset_equipment`)" + (
            f" and what a request for each write looks like (`requests:` {requests})."
            if True in recorded else
            "; this branch's policy has no `requests:` section, so PG110 has no request facts."
        ),
        "Source: tests/integration/frameworks/ (stories.py, app.py, one adapter per",
        "framework in adapters/, test_matrix.py).",
        "",
        "## Stories",
        "",
        *stories,
        "",
        "## Shapes (the traces of each framework, the stories run in each)",
        "",
        *shapes,
        "",
        "## The matrix",
        "",
        *matrix(results),
        "",
        "## Outcomes per shape",
        "",
        "Each cell: `ok` or `FAIL`, then the codes the story's run raised (`?`: cannot",
        "decide). A failure story passes when its detectors alert; a clean story when",
        "nothing at all does. In a trace with several runs an alert counts for the run",
        "whose spans it names (an alert on a span of none of them counts against each).",
        "",
        *outcomes(results),
        "## Installation",
        "",
        "The LangGraph rows run in the test environment (pyproject's `test` extra). Every",
        "other framework runs in a virtualenv of its own, built from PyPI with uv on first",
        "use and cached under `~/.cache/pathgrade-frameworks/<framework>-<hash of its pins>`",
        "(`$PATHGRADE_FRAMEWORKS_CACHE`): their pins conflict (Google ADK needs the",
        "OpenTelemetry SDK <= 1.44, Strands a semantic-conventions release the newest SDK",
        "excludes, CrewAI an older pydantic), and a shared resolution held Pydantic AI back",
        "some thirty releases. Each adapter runs as a subprocess in its venv, so one",
        "framework's failure names itself.",
        "",
        *textwrap.wrap(
            f"In the recorded run the installs took {sum(r['install_s'] for r in results):.0f}"
            " s in all (uv's download cache warm; with it empty the largest, CrewAI, took 24 s"
            f" and Google ADK 9 s) and the agents {sum(r['run_s'] for r in results):.0f} s for"
            " every shape of every framework, added up. The adapters run at once"
            f" ({run.get('parallel', '?')} at a time) against one stack and their alerts are"
            " awaited together (a failure's alert comes a quiet window after its turn ended,"
            " about a second; `ALERT_WAIT_S` of test_matrix.py at most): the frameworks took"
            f" {run.get('wall_s', '?')} s of wall time on {run.get('cpus', '?')} CPUs, the"
            " stack's start (about 20 s) aside.",
            width=88,
        ),
        "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/frameworks.md")
    args = parser.parse_args(argv)
    text = render(load())
    if args.write:
        DOC.write_text(text)
        return 0
    if not DOC.exists() or DOC.read_text() != text:
        print(f"{DOC} differs: run `python -m tests.integration.frameworks.matrix_doc --write`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
