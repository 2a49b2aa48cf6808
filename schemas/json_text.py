"""JSON text on the collector's hot path, read and written straight through CPython's C
scanner and encoder (the ones `json.loads` and `json.dumps` use).

`json.loads` and `JSONEncoder.encode` pay, per call, for work these texts do not need:
two whitespace regex matches around the scan, and a new C encoder object (with a closure
for floats and a dict of seen containers) per encode. For the short texts facts read and
write, that is a third of the parse and half the encode (callgrind on bench/ingest.py's
realistic mix: 16.1 against 24.3 k instructions per model output parsed, 13.3 against
23.0 per facts value written). The answers are json's own: a text the scanner does not
take whole (leading or trailing whitespace, extra data, invalid JSON) goes to
`json.loads`, which raises as it always does.

It is the codec of the JSON text pathgrade's own wire fields hold (the facts contract,
`schemas.facts`, is written with `sorted_compact` and read with `parse_json`), so it sits
with the definitions: the model reads its facts through it.
"""

from __future__ import annotations

import json
from typing import Any

_scan_once = json.JSONDecoder().scan_once


def loads(text: str) -> Any:
    """`json.loads(text)`: the same value, or the same ValueError."""
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


def parse_json(text: str) -> Any:
    """`text` parsed as JSON, or None when empty or not JSON."""
    if not text:
        return None
    try:
        return loads(text)
    except ValueError:
        return None


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.encoder's own C encoder, configured as JSONEncoder(sort_keys=True,
# separators=(",", ":"), ensure_ascii=False, check_circular=False) configures it.
_encode_sorted = json.encoder.c_make_encoder(
    None, _unserialisable, json.encoder.encode_basestring, None, ":", ",", True, False, True
)


def sorted_compact(value: Any) -> str:
    """`value` as JSON text with sorted keys, no spaces, non-ASCII as is (what
    `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
    writes; no check for circular containers: facts are built fresh, never cyclic)."""
    return "".join(_encode_sorted(value, 0))


# json.encoder's C encoder as json.dumps(value, sort_keys=True, default=str) configures
# it, without the check for circular containers.
_encode_sorted_default = json.encoder.c_make_encoder(
    None, str, json.encoder.encode_basestring_ascii, None, ": ", ", ", True, False, True
)


def sorted_text(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, default=str)`'s text (values JSON has no type
    for as their str) without a new encoder per call; no check for circular containers
    (keys and signatures are built fresh, never cyclic)."""
    return "".join(_encode_sorted_default(value, 0))
