"""The collector's allow-list at work: whether an attribute's value may be forwarded as
(scrubbed) text (`AllowList`: the default list of `schemas.allowed_keys` plus a
deployment's `allowed_keys`, exact keys or `fnmatch` patterns), and whether a key may be
forwarded as it is (`looks_like_key`: `schemas.allowed_keys.KEY_SHAPE`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from pathgrade.schemas.allowed_keys import DEFAULT_KEYS, DEFAULT_PREFIXES, KEY_SHAPE

_KEY_SHAPE = re.compile(KEY_SHAPE)


class AllowList:
    """The default allow-list plus a deployment's own entries (exact keys, or `fnmatch`
    patterns when they hold `*`, `?` or `[`)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        entries = list(extra)
        self.keys = DEFAULT_KEYS | {e for e in entries if not _is_pattern(e)}
        self.prefixes = DEFAULT_PREFIXES
        patterns = [fnmatch.translate(e) for e in entries if _is_pattern(e)]
        self._patterns = re.compile("|".join(patterns)) if patterns else None

    def allows(self, key: str) -> bool:
        """True when `key`'s value may be forwarded as (scrubbed) text."""
        if key in self.keys or key.startswith(self.prefixes):
            return True
        return self._patterns is not None and self._patterns.match(key) is not None


def _is_pattern(entry: str) -> bool:
    return any(c in entry for c in "*?[")


def looks_like_key(key: str) -> bool:
    """True when `key` has an attribute key's shape (see the module doc)."""
    return _KEY_SHAPE.fullmatch(key) is not None
