"""pyproject.toml installs every package folder, under the one `pathgrade` namespace; CI
runs the README's test command (tests/test_readme.py checks the rest of the README)."""

from __future__ import annotations

import tomllib

from pathgrade.cli.layout import PACKAGE_DIRS
from tests.support.paths import REPO_ROOT


def _setuptools() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_pathgrade() -> None:
    folders = {
        ".".join([PACKAGE_DIRS[folder], *init.parent.relative_to(REPO_ROOT / folder).parts])
        for folder in PACKAGE_DIRS
        for init in (REPO_ROOT / folder).rglob("__init__.py")
    }
    assert set(_setuptools()["packages"]) == folders
    assert all(name == "pathgrade" or name.startswith("pathgrade.") for name in folders)


def test_the_package_dir_mapping_is_the_checkers() -> None:
    mapping = _setuptools()["package-dir"]
    assert {folder: package for package, folder in mapping.items()} == PACKAGE_DIRS


def _test_command(page: str) -> str:
    """The command in the first code block after "Install and run the tests" in `page`."""
    section = (REPO_ROOT / page).read_text().split("Install and run the tests", 1)[1]
    return section.split("```\n", 2)[1].strip()


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    """The README's test command (which installs Chromium for the browser tests when it is
    missing) is the command .ci/run runs, so a fresh machine gets what CI gets, and the one
    docs/getting-started.md gives in full."""
    command = _test_command("README.md")
    assert "apt-get install -y -q chromium" in command and command.endswith("&& pytest")
    ci = (REPO_ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == command
    assert _test_command("docs/getting-started.md") == command
