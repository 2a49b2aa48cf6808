"""Giving back a library's start-up pages: which mappings are advised, and the advice taken."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest
from pathgrade.batch_plane.store.client import engine_bounds
from pydantic import ValidationError

from pathgrade.stack.options import StackOptions
from pathgrade.stack.startup_pages import page_out_library, read_only_mappings

MAPS = """\
7f0000000000-7f0000100000 r--p 00000000 08:01 12 /venv/chdb/_chdb.abi3.so
7f0000100000-7f0000300000 r-xp 00100000 08:01 12 /venv/chdb/_chdb.abi3.so
7f0000300000-7f0000310000 rw-p 00300000 08:01 12 /venv/chdb/_chdb.abi3.so
7f0000400000-7f0000401000 r--p 00000000 08:01 13 /usr/lib/libc.so.6
7f0000500000-7f0000501000 r--p 00000000 08:01 14 /data/_chdb_notes/readme
7f0000600000-7f0000601000 rw-p 00000000 00:00 0
"""


def test_only_the_read_only_mappings_of_the_named_library_are_advised() -> None:
    assert read_only_mappings("_chdb", MAPS) == [
        (0x7F0000000000, 0x7F0000100000),
        (0x7F0000100000, 0x7F0000300000),
    ]
    assert read_only_mappings("absent", MAPS) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_PAGEOUT is Linux's")
def test_the_kernel_takes_the_advice_for_a_loaded_library() -> None:
    loaded = Path(sys.modules["_ctypes"].__file__).name
    ranges = read_only_mappings(loaded, Path("/proc/self/maps").read_text())
    assert ranges
    assert page_out_library(loaded) == sum(end - start for start, end in ranges)
    assert ctypes.sizeof(ctypes.c_int) == 4  # the library still works after its pages went


def test_the_store_memory_settings_are_bounded_and_name_their_key() -> None:
    with pytest.raises(ValidationError, match="store_memory_mb"):
        StackOptions(data_dir=Path("d"), store_memory_mb=255)
    with pytest.raises(ValidationError, match="store_cache_mb"):
        StackOptions(data_dir=Path("d"), store_cache_mb=-1)
    options = StackOptions(data_dir=Path("d"))
    bounds = engine_bounds(options.store_memory_mb, options.store_cache_mb)
    assert bounds["max_server_memory_usage"] == 1024 * 1024 * 1024
    assert bounds["mark_cache_size"] == bounds["primary_index_cache_size"] == 128 * 1024 * 1024
