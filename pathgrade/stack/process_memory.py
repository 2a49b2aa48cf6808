"""A process's resident memory, as Linux counts it (`/proc/PID/statm`)."""

from __future__ import annotations

import os
from pathlib import Path

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes(pid: int | None = None) -> int:
    """Resident memory of process `pid` (None: this one); 0 where unknown or gone."""
    where = "self" if pid is None else str(pid)
    try:
        return int(Path(f"/proc/{where}/statm").read_text().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0
