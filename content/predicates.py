"""Content predicates: what the detectors ask of raw text, defined once for the collector
(which evaluates them before the text is dropped and records the answers as facts,
`schemas.facts`) and the detectors (which evaluate them on captured text). The lexicons
are tables in `schemas.lexicons`; here is their matching (`Lexicon`: `INSTRUCTIONS`,
`CLAIMS`, `ASKS`) and the readers of arguments and requests.

- `INSTRUCTION_LEXICON`: instruction-like text in content the agent did not get from the
  user (PG117): named regular expressions, matched case-insensitively, line by line
  (`Lexicon`: lower-case expressions on the lower-cased text). `INSTRUCTION_ANCHORS`
  names, per entry, literals one of which every match of it contains: a text holding
  none of them is answered without running the expressions (same answers, a fraction of
  the cost: the expressions start with `\b`, which defeats the engine's literal scan).
- `CLAIM_LEXICON`: first-person claims of a completed action in a final answer (PG116),
  each with the tool-name fragments a successful call must contain to back it.
- `ASK_LEXICON`: questions that ask the user for a value (an account number, an order
  number, an e-mail address...) in a model's output (PG121): each slot with the
  argument-name fragments of the calls that already hold such a value.
- `call_arguments`: a tool call's arguments as one JSON object (the instrumentations'
  wrappers unwrapped: a Python call's `{"args": [], "kwargs": {...}}`, OpenLLMetry's
  LangChain callback `{"input_str", "inputs": {...}}`), the canonical arguments every
  fingerprint, skeleton and detector reads.
- `argument_skeleton`: the shape of a JSON value without its values (keys, JSON types,
  lengths), for PG104's structural checks.
- `RequestPatterns`: what a user's request for each write tool looks like (a policy's
  `requests`: tool -> regular expressions, matched case-insensitively on the turn's
  request, the text the user typed in the last user message of a model call's input),
  for PG110: the collector
  records which writes the request asked for (`schemas.facts`, `requests`), the
  detectors match captured messages with the same patterns.

A lexicon's version is part of the facts contract (`schemas.facts.FACTS_VERSION`): a new
entry or a changed expression is a new version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from pathgrade.content.memo import BoundedMemo
from pathgrade.schemas import lexicons as lx
from pathgrade.schemas.json_text import loads
from pathgrade.schemas.lexicons import SKELETON_MAX_DEPTH, SKELETON_MAX_ITEMS

_CACHED_TEXTS = 4096  # texts whose hits a lexicon remembers (tool results repeat in inputs)
_CACHED_TEXT_CHARS = 4096


class Lexicon:
    """Named regular expressions (lower-case, matched on the lower-cased text: case does
    not matter, as with re.IGNORECASE, at a fraction of its cost), line by line, with one
    combined expression that answers "does anything match" in a single scan; the hits of
    short texts are remembered (bounded). With `anchors` (name -> literals, one of which
    every match of that entry contains), a text holding no anchor is answered at once."""

    def __init__(
        self, expressions: Mapping[str, str], anchors: Mapping[str, tuple[str, ...]] | None = None
    ) -> None:
        self.expressions = dict(expressions)
        self.anchors: tuple[str, ...] = (
            tuple(dict.fromkeys(a for name in self.expressions for a in anchors[name]))
            if anchors is not None
            else ()
        )
        """Every anchor, once (empty: the lexicon has none and reads every text)."""
        self._compiled = {name: re.compile(e, re.MULTILINE) for name, e in self.expressions.items()}
        self._any = re.compile(
            "|".join(f"(?:{e})" for e in self.expressions.values()), re.MULTILINE
        )
        self._remembered: BoundedMemo[str, list[str]] = BoundedMemo(_CACHED_TEXTS)

    def hits(self, text: str) -> list[str]:
        """The names of the entries that match somewhere in `text`, in lexicon order."""
        if not text:
            return []
        remembered = self._remembered.get(text)
        if remembered is not None:
            return remembered
        lowered = text.lower()
        found = (
            [name for name, pattern in self._compiled.items() if pattern.search(lowered)]
            if self._may_match(lowered) and self._any.search(lowered)
            else []
        )
        if len(text) <= _CACHED_TEXT_CHARS:
            self._remembered.put(text, found)
        return found

    def _may_match(self, lowered: str) -> bool:
        """False when the lower-cased text holds none of the anchors (so no match)."""
        if not self.anchors:
            return True
        for anchor in self.anchors:  # noqa: SIM110 (a loop: half the cost of any())
            if anchor in lowered:
                return True
        return False


INSTRUCTIONS: Final = Lexicon(lx.INSTRUCTION_LEXICON, lx.INSTRUCTION_ANCHORS)
CLAIMS: Final = Lexicon(
    {name: lx.CLAIM_PREFIX + f"(?:{verb})" for name, (verb, _) in lx.CLAIM_LEXICON.items()},
    lx.CLAIM_ANCHORS,
)
ASKS: Final = Lexicon(
    {name: lx.ASK_PREFIX + f"(?:{noun})" for name, (noun, _) in lx.ASK_LEXICON.items()},
    lx.ASK_ANCHORS,
)


def call_arguments(text: str) -> dict[str, Any] | None:
    """A tool call's arguments (JSON text) as one object; None when `text` is empty or not
    a JSON object. Instrumentations write two wrappers: for a LangChain tool, OpenLLMetry's
    callback `{"input_str": <Python repr>, "inputs": {...}, "tags", "metadata", "kwargs"}`,
    whose inputs are the arguments, and a Python call's bound arguments, `{"args": [],
    "kwargs": {...}}` (OpenLLMetry; OpenInference's smolagents adds the wrapped method's
    own keywords beside them, its LlamaIndex leaves the empty `args` out), whose kwargs are
    the arguments when no positional argument was passed (`collector/_facts_kernel.c`
    reads both alike)."""
    if not text:
        return None
    try:
        value = loads(text)
    except ValueError:
        return None
    return arguments_object(value)


def arguments_object(value: Any) -> dict[str, Any] | None:
    """A tool call's arguments as one object from their parsed JSON `value`, the wrappers
    `call_arguments` names unwrapped; None when it is not an object."""
    if not isinstance(value, dict):
        return None
    if "input_str" in value and "inputs" in value:
        inputs = value["inputs"]
        return inputs if isinstance(inputs, dict) else None
    if "kwargs" in value and not value.get("args"):
        kwargs = value["kwargs"]
        return kwargs if isinstance(kwargs, dict) else None
    return value


def requested_arguments(value: Any) -> dict[str, Any] | None:
    """The arguments of a tool call a model requested (`messages.RequestedToolCall`: JSON
    text, as OpenAI writes them, or the value a convention part holds) as one object, as
    `call_arguments` reads them; None when they are not an object."""
    return call_arguments(value) if isinstance(value, str) else arguments_object(value)


def argument_skeleton(
    value: Any, depth: int = 0, name: Callable[[str], str] = str
) -> dict[str, Any]:
    """The shape of a JSON value without its values: `{"type"}` for every value, `length`
    for strings and arrays, `keys` (`name(key)` -> skeleton) for objects, `items` for
    arrays; cut at SKELETON_MAX_DEPTH / SKELETON_MAX_ITEMS with `"truncated": true`."""
    if isinstance(value, dict):
        shape: dict[str, Any] = {"type": "object"}
        if depth < SKELETON_MAX_DEPTH:
            items = list(value.items())
            shape["keys"] = {
                name(str(k)): argument_skeleton(v, depth + 1, name)
                for k, v in items[:SKELETON_MAX_ITEMS]
            }
            if len(items) > SKELETON_MAX_ITEMS:
                shape["truncated"] = True
        else:
            shape["truncated"] = True
        return shape
    if isinstance(value, list):
        shape = {"type": "array", "length": len(value)}
        if depth < SKELETON_MAX_DEPTH:
            shape["items"] = [
                argument_skeleton(v, depth + 1, name) for v in value[:SKELETON_MAX_ITEMS]
            ]
            if len(value) > SKELETON_MAX_ITEMS:
                shape["truncated"] = True
        else:
            shape["truncated"] = True
        return shape
    if isinstance(value, str):
        return {"type": "string", "length": len(value)}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    return {"type": "null"}


REQUEST_SECTIONS: Final = ("defaults", "tiers", "services", "agents")
"""The policy document's sections (`detectors.policy`): a section holds `requests`, and
`tiers`, `services` and `agents` (and a service's own `agents`) map names to sections."""


class RequestPatterns:
    """Per write tool, regular expressions of a user's message that asks for it (a
    policy's `requests`); ValueError names a pattern that does not compile."""

    def __init__(self, patterns: Mapping[str, Sequence[str]]) -> None:
        self.patterns = {tool: tuple(found) for tool, found in sorted(patterns.items())}
        self._compiled: dict[str, list[re.Pattern[str]]] = {}
        for tool, found in self.patterns.items():
            compiled = []
            for pattern in found:
                try:
                    compiled.append(re.compile(pattern, re.IGNORECASE))
                except re.error as error:
                    raise ValueError(
                        f"requests.{tool}: invalid regular expression {pattern!r}: {error}"
                    ) from error
            self._compiled[tool] = compiled

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def asked(self, request: str) -> dict[str, bool]:
        """For each tool with patterns, whether `request` (a user's message) asks for it."""
        return {
            tool: any(p.search(request) for p in patterns)
            for tool, patterns in self._compiled.items()
        }

    @classmethod
    def of_policy(cls, document: Mapping[str, Any]) -> RequestPatterns:
        """Every section's `requests` of a policy document (its parsed YAML), joined: a
        tool's patterns are those of every section that names it. ValueError names a
        `requests` that is not a mapping of tool -> list of patterns."""
        joined: dict[str, list[str]] = {}
        for where, section in _sections(document):
            requests = section.get("requests") if isinstance(section, Mapping) else None
            if requests is None:
                continue
            if not isinstance(requests, Mapping):
                raise ValueError(f"{where}.requests: expected a mapping of tool -> patterns")
            for tool, patterns in requests.items():
                if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                    raise ValueError(f"{where}.requests.{tool}: expected a list of patterns")
                known = joined.setdefault(str(tool), [])
                known += [p for p in patterns if p not in known]
        return cls(joined)


def _sections(document: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(dotted path, section) of every section of a policy document."""
    found: list[tuple[str, Any]] = [("defaults", document.get("defaults"))]
    for group in REQUEST_SECTIONS[1:]:
        named = document.get(group)
        for name, section in named.items() if isinstance(named, Mapping) else ():
            found.append((f"{group}.{name}", section))
            inner_sections = section.get("agents") if isinstance(section, Mapping) else None
            agents = inner_sections if group == "services" else None
            for agent, inner in agents.items() if isinstance(agents, Mapping) else ():
                found.append((f"{group}.{name}.agents.{agent}", inner))
    return found
