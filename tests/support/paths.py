"""Where the repository's files are, for tests that read docs, examples or deploy files."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
