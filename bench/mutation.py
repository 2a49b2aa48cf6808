"""Mutation testing of chosen modules against chosen tests, with a number (cosmic-ray).

    python bench/mutation.py batch_plane/evaluation/gate.py \\
        --tests tests/unit/batch_plane/evaluation [--tests ...] [--out .mutation]

For each module: the repository is copied to a scratch folder (the working tree is never
mutated; `bench/mutation_site` makes every test process, and any `python -m pathgrade.cli`
it starts, import the copy), the given tests run once under coverage with one context per
test, then each mutant that cosmic-ray generates is applied to the copy and only the tests
covering its lines run (in a fork of bench/mutation_runner.py, which imported the tests'
libraries once), stopping at the first failure (a line run only at import, such as
a decorator or a module constant, runs them all, as does a line behind `functools.cache`,
`lru_cache` or `cached_property`, which coverage gives to the first test that ran it). The
rules that need no cosmic-ray are in bench/mutation_rules.py. It prints, per module, mutants
generated / killed / survived / timed out and the killed share ((killed + timed out) /
(generated - equivalent)), then every survivor with its line, operator and change.

Operators: cosmic-ray's core set, less the mutants that only add noise: binary operators
are swapped for their mirror only (+ and -, * and /, // and /, % and //, ** and *, << and
>>, | and &, ^ and &), comparisons are not turned into identity tests (`<` into `is`),
unary operators only lose `not`/`-` or swap `-` and `+`, annotations are not mutated
(with postponed evaluation they are never run), nor a signature's keyword-only `*`.

Survivors reviewed as equivalent (no test can tell them apart from the original) are
listed in bench/mutation_equivalents.toml with the reason; a changed line no longer
matches its entry and shows as a survivor again. Each module's cosmic-ray session stays in
--out (`cr-report .mutation/<module>.sqlite`). Not in CI: it is slow (docs/mutation.md).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from contextlib import chdir, closing
from dataclasses import dataclass, field
from pathlib import Path

import cosmic_ray.commands
import cosmic_ray.plugins
from cosmic_ray.mutating import mutate_code, use_mutation
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome, WorkItem, WorkResult
from coverage import CoverageData
from mutation_rules import (
    annotation_spans,
    cached_lines,
    drop_bytecode,
    in_annotation,
    kept_operator,
    keyword_only_marker,
    selected_tests,
    statement_starts,
)

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS = REPO / "bench" / "mutation_equivalents.toml"
COPY_IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", ".hypothesis", ".pytest_cache",
    ".ruff_cache", ".mutation", "pathgrade-data",
)  # fmt: skip
# Plugins are not autoloaded (xdist's `-n 2` and langsmith's import cost nothing here).
PYTEST_ARGS = ["-q", "-o", "addopts=", "-p", "no:cacheprovider"]
TIMED_OUT = "timeout"  # the output recorded for a test run stopped at its timeout (as cosmic-ray)
NOT_COVERED = "no test covers it"


@dataclass(frozen=True)
class Equivalent:
    """A reviewed survivor: no test can tell it from the original, and why."""

    module: str
    operator: str
    line: str
    mutated: str
    reason: str


def load_equivalents(path: Path = EQUIVALENTS) -> list[Equivalent]:
    if not path.exists():
        return []
    return [Equivalent(**entry) for entry in tomllib.loads(path.read_text())["equivalent"]]


@dataclass
class Survivor:
    """A mutant no selected test failed on: where, which operator, the changed line."""

    line: int
    operator: str
    before: str
    after: str
    why: str = ""  # "" or "no test covers it"; for an equivalent, the reviewed reason


@dataclass
class ModuleFigures:
    """Counts of one module's run, and its survivors."""

    module: str
    generated: int = 0
    kept: int = 0  # mutants before sampling (= generated without --sample)
    killed: int = 0
    survived: int = 0
    timed_out: int = 0
    errors: int = 0
    survivors: list[Survivor] = field(default_factory=list)
    equivalents: list[Survivor] = field(default_factory=list)

    @property
    def killed_share(self) -> float:
        judged = self.generated - len(self.equivalents) - self.errors
        return (self.killed + self.timed_out) / judged if judged else 1.0

    def summary(self) -> str:
        return (
            f"{self.module}: {self.generated} generated"
            + (f" (an even sample of {self.kept})" if self.kept > self.generated else "")
            + f", {self.killed} killed, "
            f"{self.survived} survived ({len(self.equivalents)} equivalent), "
            f"{self.timed_out} timed out, {self.errors} errors: "
            f"{self.killed_share:.1%} killed"
        )


def copy_repository(destination: Path) -> Path:
    """The repository's files (no .git, .venv, caches) under `destination`."""
    root = destination / "repo"
    shutil.copytree(REPO, root, ignore=COPY_IGNORED)
    return root


def test_environment(root: Path) -> dict[str, str]:
    """Test processes import the `pathgrade` packages of the copy at `root`."""
    return {
        **os.environ,
        "PYTHONPATH": str(root / "bench" / "mutation_site"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def covering_tests(root: Path, module: str, tests: list[str]) -> tuple[dict[int, set[str]], float]:
    """Per line of `module` the test ids that run it ("" for code run at import), and how
    long the tests took under coverage. Exits when they fail on the unmutated copy."""
    data_file = root / ".coverage-mutation"
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *PYTEST_ARGS, "-p", "pytest_cov",
         f"--cov={(root / module).parent}", "--cov-context=test", "--cov-report=", *tests],
        cwd=root, env={**test_environment(root), "COVERAGE_FILE": str(data_file)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"{module}: the tests fail on the unmutated code:\n{run.stdout[-4000:]}")
    data = CoverageData(basename=str(data_file))
    data.read()
    by_line = data.contexts_by_lineno(str((root / module).resolve()))
    covering = {line: {c.partition("|")[0] for c in ids} for line, ids in by_line.items()}
    return covering, elapsed


def changed_line(source: str, spec: MutationSpec) -> tuple[str, str]:
    """The mutated line of `source` before and after the mutation (stripped)."""
    operator = cosmic_ray.plugins.get_operator(spec.operator_name)(**spec.operator_args)
    mutated = mutate_code(source, operator, spec.occurrence) or source
    removed = added = ""
    for line in difflib.unified_diff(source.splitlines(), mutated.splitlines(), n=0, lineterm=""):
        if line.startswith("-") and not line.startswith("---"):
            removed = removed or line[1:].strip()
        elif line.startswith("+") and not line.startswith("+++"):
            added = added or line[1:].strip()
    return removed, added


class ForkingRunner:
    """bench/mutation_runner.py in the copy: pytest runs, each in a fork of a process that
    imported pytest and the tests' libraries once (see its doc)."""

    def __init__(self, root: Path, tests: list[str]) -> None:
        self.log = root / ".mutation-test.log"
        self.errors = (root / ".mutation-runner.err").open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(root / "bench" / "mutation_runner.py"), *PYTEST_ARGS, *tests],
            cwd=root, env=test_environment(root), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errors, text=True,
        )  # fmt: skip
        try:
            ready = self._answer().get("ready")
        except BaseException:  # stopped while it starts (SIGTERM, Ctrl-C): stop it too
            self.process.terminate()
            raise
        if not ready:
            self._stopped("did not start")

    def _answer(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        return json.loads(line) if line else {}

    def run(self, args: list[str], timeout_s: float) -> tuple[int, bool, str]:
        """pytest `args` in a fork: exit code, whether it timed out, the output's end."""
        assert self.process.stdin is not None
        request = {"args": args, "timeout_s": timeout_s, "log": str(self.log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        if not answer:
            self._stopped("stopped")
        return answer["exit_code"], answer["timed_out"], self.log.read_text()[-3000:]

    def _stopped(self, what: str) -> None:
        self.errors.flush()
        logs = (Path(self.errors.name), self.log, self.log.with_name(".mutation-runner.log"))
        tail = "".join(log.read_text()[-3000:] for log in logs if log.exists())
        sys.exit(f"the mutation test runner {what}:\n{tail}")

    def close(self) -> None:
        """Stop the runner (and a fork it has at work)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.terminate()
        self.process.wait(timeout=60)
        self.errors.close()


def run_mutant(
    spec: MutationSpec, ids: list[str], runner: ForkingRunner, timeout_s: float
) -> WorkResult:
    """Apply the mutant to the copy, run `ids` on it (first failure stops), restore."""
    if not ids:
        return WorkResult(
            worker_outcome=WorkerOutcome.NORMAL, test_outcome=TestOutcome.SURVIVED,
            output=NOT_COVERED,
        )  # fmt: skip
    operator = cosmic_ray.plugins.get_operator(spec.operator_name)(**spec.operator_args)
    try:
        with use_mutation(spec.module_path, operator, spec.occurrence) as (_, mutated):
            if mutated is None:
                return WorkResult(worker_outcome=WorkerOutcome.NO_TEST)
            drop_bytecode(Path(spec.module_path))
            code, timed_out, output = runner.run([*PYTEST_ARGS, "-x", *ids], timeout_s)
    finally:
        drop_bytecode(Path(spec.module_path))
    return WorkResult(
        worker_outcome=WorkerOutcome.NORMAL,
        test_outcome=TestOutcome.KILLED if code or timed_out else TestOutcome.SURVIVED,
        output=TIMED_OUT if timed_out else output,
    )


def source_order(spec: MutationSpec) -> tuple:
    """Mutants in the order of their place in the source, then operator."""
    return (tuple(spec.start_pos), tuple(spec.end_pos), spec.operator_name, spec.occurrence)


def planned_mutants(
    db: WorkDB, module: str, source: str, sample: int | None = None
) -> tuple[list[WorkItem], int]:
    """Initialise `db` with cosmic-ray's mutants of `module`; mark those left out (see the
    module doc) as skipped and return the others, in source order; with `sample`, that
    many of them spread evenly over the module (the rest skipped too). Also returns how
    many were kept before sampling."""
    cosmic_ray.commands.init([Path(module)], db, {})
    spans, lines = annotation_spans(source), source.splitlines()
    kept, left_out = [], []
    for item in db.pending_work_items:
        (spec,) = item.mutations
        start, end = tuple(spec.start_pos), tuple(spec.end_pos)
        wanted = (
            kept_operator(spec.operator_name)
            and not in_annotation(start, end, spans)
            and not keyword_only_marker(start, lines)
        )
        (kept if wanted else left_out).append(item)
    kept.sort(key=lambda item: source_order(item.mutations[0]))
    total = len(kept)
    if sample is not None and sample < total:
        chosen = {round(n * total / sample) for n in range(sample)}
        left_out += [item for n, item in enumerate(kept) if n not in chosen]
        kept = [item for n, item in enumerate(kept) if n in chosen]
    for item in left_out:
        db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    return kept, total


MutantKey = tuple[str, int, tuple[int, int], tuple[int, int]]


def mutant_key(spec: MutationSpec) -> MutantKey:
    """A mutant's identity across sessions of the same source: operator and position."""
    return (spec.operator_name, spec.occurrence, tuple(spec.start_pos), tuple(spec.end_pos))


def session_path(out: Path, module: str) -> Path:
    return out / (module.replace("/", ".").removesuffix(".py") + ".sqlite")


def killed_before(session: Path | None) -> dict[MutantKey, WorkResult]:
    """The mutants a previous session killed (or timed out), by key; {} without one."""
    if session is None or not session.exists():
        return {}
    with use_db(str(session), WorkDB.Mode.open) as db:
        return {
            mutant_key(item.mutations[0]): result
            for item, result in db.completed_work_items
            if result.test_outcome == TestOutcome.KILLED
        }


def run_module(
    root: Path,
    module: str,
    tests: list[str],
    out: Path,
    equivalents: list[Equivalent],
    rerun: Path | None = None,
    sample: int | None = None,
) -> ModuleFigures:
    """Every kept mutant of `module` against the tests covering it (with `rerun`, a
    folder of earlier sessions of the same source, only those it did not kill: tests
    added since cannot revive a killed mutant); figures and survivors."""
    covering, baseline_s = covering_tests(root, module, tests)
    timeout_s = max(30.0, 3 * baseline_s)
    source = (root / module).read_text()
    starts, cached = statement_starts(source), cached_lines(source)
    figures = ModuleFigures(module)
    out.mkdir(parents=True, exist_ok=True)
    session = session_path(out, module)
    earlier = killed_before(session_path(rerun, module) if rerun else None)
    session.unlink(missing_ok=True)
    runner = ForkingRunner(root, tests)
    with use_db(str(session)) as db, chdir(root), closing(runner):
        items, figures.kept = planned_mutants(db, module, source, sample)
        figures.generated = len(items)
        for done, item in enumerate(items, 1):
            (spec,) = item.mutations
            lines = range(spec.start_pos[0], spec.end_pos[0] + 1)
            result = earlier.get(mutant_key(spec)) or run_mutant(
                spec, selected_tests(lines, covering, starts, cached, tests), runner, timeout_s
            )
            db.set_result(item.job_id, result)
            _count(figures, spec, result, source, equivalents)
            if done % 10 == 0 or done == len(items):
                print(f"mutation {module}: {done}/{len(items)}, {figures.survived} survived",
                      file=sys.stderr, flush=True)  # fmt: skip
    return figures


def _count(
    figures: ModuleFigures,
    spec: MutationSpec,
    result: WorkResult,
    source: str,
    equivalents: list[Equivalent],
) -> None:
    if result.worker_outcome != WorkerOutcome.NORMAL or result.test_outcome is None:
        figures.errors += 1
        return
    if result.test_outcome == TestOutcome.KILLED:
        if result.output == TIMED_OUT:
            figures.timed_out += 1
        else:
            figures.killed += 1
        return
    if result.test_outcome == TestOutcome.INCOMPETENT:
        figures.errors += 1
        return
    figures.survived += 1
    before, after = changed_line(source, spec)
    survivor = Survivor(spec.start_pos[0], spec.operator_name, before, after)
    key = (figures.module, spec.operator_name, before, after)
    match = next((e for e in equivalents if (e.module, e.operator, e.line, e.mutated) == key), None)
    if match:
        survivor.why = match.reason
        figures.equivalents.append(survivor)
    else:
        survivor.why = result.output if result.output == NOT_COVERED else ""
        figures.survivors.append(survivor)


def report(figures: ModuleFigures) -> str:
    lines = [figures.summary()]
    lines += [
        f"  survived  line {s.line} {s.operator}: {s.before!r} -> {s.after!r}"
        + (f" ({s.why})" if s.why else "")
        for s in sorted(figures.survivors, key=lambda s: s.line)
    ]
    lines += [
        f"  equivalent line {s.line} {s.operator}: {s.before!r} -> {s.after!r}: {s.why}"
        for s in sorted(figures.equivalents, key=lambda s: s.line)
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="+", help="module files to mutate (repository paths)")
    parser.add_argument("--tests", action="append", required=True,
                        help="test files, folders or ids to run (repeatable)")  # fmt: skip
    parser.add_argument(
        "--rerun", type=Path, metavar="DIR",
        help="an earlier --out of the same source: run only the mutants it did not kill",
    )  # fmt: skip
    parser.add_argument(
        "--sample", type=int, metavar="N",
        help="run N mutants per module, spread evenly over it (an estimate, said so)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=REPO / ".mutation",
                        help="folder of the cosmic-ray sessions (default .mutation/)")  # fmt: skip
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the scratch copy is removed
    for module in args.modules:
        if not (REPO / module).is_file():
            parser.error(f"module {module}: no such file in the repository")
    equivalents = load_equivalents()
    every = []
    with tempfile.TemporaryDirectory(prefix="pathgrade-mutation-") as scratch:
        root = copy_repository(Path(scratch))
        for module in args.modules:
            figures = run_module(
                root, module, args.tests, args.out.resolve(), equivalents, args.rerun, args.sample
            )
            every.append(figures)
            print(report(figures), flush=True)
    if len(every) > 1:
        total = ModuleFigures(
            "all",
            generated=sum(f.generated for f in every), killed=sum(f.killed for f in every),
            survived=sum(f.survived for f in every), timed_out=sum(f.timed_out for f in every),
            errors=sum(f.errors for f in every),
            equivalents=[s for f in every for s in f.equivalents],
        )  # fmt: skip
        print(total.summary())


if __name__ == "__main__":
    main()
