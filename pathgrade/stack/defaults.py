"""Defaults of `pathgrade up` that its command line shows (a light module: no I/O imports)."""

DEFAULT_BROKER_MAX_MB = 1024
"""Resident memory of the bundled broker past which `pathgrade up` swaps in a fresh one."""
DEFAULT_STATUS_EVERY_S = 30
"""How often `pathgrade up` takes a status snapshot (`pathgrade.stack.status`)."""
DEFAULT_STORE_WRITER_NICENESS = 19
"""How much nicer than the rest `pathgrade up` runs its store writer (`stack.priority`)."""
