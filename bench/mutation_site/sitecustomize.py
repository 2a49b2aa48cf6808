"""Imports the `pathgrade` packages from the copy of the repository this file lies in.

`bench/mutation.py` runs every test process with this folder on PYTHONPATH, so a test and
any `python -m pathgrade.cli` it starts import the mutated copy, not the editable install
(whose finder maps `pathgrade.<layer>` onto the working tree, which stays untouched).
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class CosmicRayTestingException(Exception):
    """What cosmic-ray's exception mutant catches instead of the original: never raised."""


class CopyFinder(importlib.abc.MetaPathFinder):
    """Finds the top-level packages of pyproject's `package-dir` mapping under ROOT."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def install() -> None:
    """Put a CopyFinder first on sys.meta_path, and give cosmic-ray's exception mutant
    (`except CosmicRayTestingException:`, a handler that catches nothing) its name, so it
    lets the original exception through instead of failing on a NameError."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: ROOT / folder for name, folder in setuptools["package-dir"].items()}
    sys.meta_path.insert(0, CopyFinder(folders))
    builtins.CosmicRayTestingException = CosmicRayTestingException  # type: ignore[attr-defined]


install()
