"""Giving back the pages a native library touched only while starting (Linux).

chDB is one 555 MB library: importing it and starting its engine reads about 270 MB of it
into the store owner's resident memory (static initialisers registering thousands of
functions, formats and settings, spread over the whole file), of which inserts and queries
touch about 60 MB again (bench/memory.py, docs/scale.md's Memory). Once the store is open,
`page_out_library` asks the kernel to reclaim the library's read-only pages now
(`MADV_PAGEOUT`, Linux 5.4): they are clean copies of the file, so nothing is written, and a
page needed again is read back from the file on its first touch.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

MADV_PAGEOUT = 21
_MAPS = Path("/proc/self/maps")


def read_only_mappings(library: str, maps: str) -> list[tuple[int, int]]:
    """(start, end) of every read-only mapping (`r--p`, `r-xp`) of a file whose name
    contains `library`, from the text of /proc/PID/maps; writable mappings (relocated
    data, the library's own state) are left out."""
    ranges = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or library not in Path(fields[5]).name:
            continue
        if fields[1][0] == "r" and fields[1][1] == "-":
            start, end = (int(address, 16) for address in fields[0].split("-"))
            ranges.append((start, end))
    return ranges


def page_out_library(library: str) -> int:
    """Ask the kernel to reclaim this process's read-only pages of the library whose file
    name contains `library`; returns the bytes of address space advised (0 where the
    system has no /proc maps or no such advice, or the library is not loaded)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        ranges = read_only_mappings(library, _MAPS.read_text())
    except OSError:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    for start, end in ranges:
        if libc.madvise(start, end - start, MADV_PAGEOUT) != 0:
            errno = ctypes.get_errno()
            log.info("MADV_PAGEOUT refused (errno %d): %s stays resident", errno, library)
            return advised
        advised += end - start
    return advised
