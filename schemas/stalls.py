"""The keys under which a process reports its stalls among its counters (the stack's
status line, `pathgrade status`, `/metrics` and the browser UI's banner read them); the
writers' stalls and their retries are `transport.stalls`."""

from __future__ import annotations

STALLED = "stalled"
"""Key of a process's counters holding its stalls: what -> why."""
WRITE_FAILURES = "write_failures"
"""Key of a process's counters: writes that failed on a resource since it started."""
