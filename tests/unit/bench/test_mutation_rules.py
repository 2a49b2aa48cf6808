"""bench/mutation_rules.py: the mutated module's stale bytecode is removed (else a mutant
as long as the one before, written in the same second, runs as that one), and the tests
chosen for a mutant (a line behind a cache runs all of them, like a line run at import)."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.benches import load_bench

TESTS = ["tests/unit/a", "tests/unit/b"]


@pytest.fixture
def rules(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench("mutation_rules", monkeypatch)


def run_module(path: Path) -> object:
    """`answer()` of the module at `path`, imported afresh the way Python imports (the
    bytecode cache read when it passes for current)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.answer()


def mutate_in_the_same_second(path: Path, text: str) -> None:
    """Write `text` (as long as the file's text) with the file's modification time."""
    before = path.stat()
    assert len(text) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_mutant_as_long_and_as_old_as_the_code_before_runs_once_its_bytecode_is_dropped(
    rules: ModuleType, tmp_path: Path
) -> None:
    module = tmp_path / "target.py"
    module.write_text("def answer():\n    return 1 == 1\n")
    cache = Path(importlib.util.cache_from_source(str(module)))
    py_compile.compile(
        str(module), cfile=str(cache), invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
    )
    sibling = cache.with_name(cache.name.replace("target", "target_other", 1))
    sibling.write_bytes(cache.read_bytes())
    mutate_in_the_same_second(module, "def answer():\n    return 1 != 1\n")
    assert run_module(module) is True  # the hazard: the mutant's source, the code before

    rules.drop_bytecode(module)

    assert not cache.exists()
    assert sibling.exists()  # another module's cache stays
    assert run_module(module) is False


def test_dropping_the_bytecode_of_a_module_never_compiled_changes_nothing(
    rules: ModuleType, tmp_path: Path
) -> None:
    module = tmp_path / "target.py"
    module.write_text("def answer():\n    return 1\n")
    rules.drop_bytecode(module)  # no __pycache__ folder yet
    assert run_module(module) == 1


CACHED_SOURCE = textwrap.dedent(
    """\
    import functools
    from functools import cache, cached_property, lru_cache


    @cache
    def model():
        return helper() + 1


    def helper():
        return deeper()


    def deeper():
        return 2


    def shared():
        return 3


    @functools.lru_cache(maxsize=4)
    def table(key):
        return shared() * key


    def plain(value):
        return shared() + value


    class Holder:
        @cached_property
        def value(self):
            return 5

        def other(self):
            return 6
    """
)


def line_of(text: str, source: str = CACHED_SOURCE) -> int:
    (number,) = [n for n, line in enumerate(source.splitlines(), 1) if line.strip() == text]
    return number


def test_the_cached_lines_are_the_cached_functions_and_what_only_they_call(
    rules: ModuleType,
) -> None:
    cached = rules.cached_lines(CACHED_SOURCE)
    for text in ("return helper() + 1", "return shared() * key", "return 5"):
        assert line_of(text) in cached, text  # @cache, @functools.lru_cache(...), property
    for text in ("return deeper()", "return 2"):
        assert line_of(text) in cached, text  # named only in a cached function (or deeper)
    for text in ("return 3", "return shared() + value", "return 6", "import functools"):
        assert line_of(text) not in cached, text  # also called uncached, or not cached


def test_a_mutant_of_a_cached_line_runs_every_test_one_elsewhere_only_its_covering_ones(
    rules: ModuleType,
) -> None:
    cached_line, plain_line = line_of("return helper() + 1"), line_of("return shared() + value")
    covering = {cached_line: {"tests/unit/a::first"}, plain_line: {"tests/unit/b::plain"}}
    starts = rules.statement_starts(CACHED_SOURCE)
    cached = rules.cached_lines(CACHED_SOURCE)

    def chosen(line: int) -> list[str]:
        return rules.selected_tests(range(line, line + 1), covering, starts, cached, TESTS)

    assert chosen(cached_line) == TESTS
    assert chosen(plain_line) == ["tests/unit/b::plain"]
    assert chosen(line_of("return 5")) == []  # cached but run by no test: none covers it


def test_a_line_run_at_import_runs_every_test_and_a_signature_its_first_lines_tests(
    rules: ModuleType,
) -> None:
    source = "LIMIT = 3\n\n\ndef check(\n    value=LIMIT,\n):\n    return value\n"
    covering = {1: {""}, 4: {"", "tests/unit/a::x"}, 7: {"tests/unit/a::x"}}
    starts = rules.statement_starts(source)

    def chosen(first: int, last: int) -> list[str]:
        return rules.selected_tests(range(first, last + 1), covering, starts, set(), TESTS)

    assert chosen(1, 1) == TESTS
    assert chosen(5, 5) == TESTS  # not recorded: its statement's first line, run at import
    assert chosen(7, 7) == ["tests/unit/a::x"]
