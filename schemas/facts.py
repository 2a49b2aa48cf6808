"""Facts: what the detectors and scorers need from content, computed from the raw content
and free of it (DESIGN.md, "Facts, not content").

The collector computes them from every span's raw values before it drops or scrubs any
(`content.facts_producer.compute_facts`), and writes them on the span as
`pathgrade.facts.*` attributes. Any producer may set them the same way; consumers read
them through the canonical model (`Span.facts`, parsed by `span_facts` on first use).

Wire contract, version 3 (`pathgrade.facts.version` = 3 on every span that has facts;
version 2 had no `fp` / `args` in the output facts' tool calls, version 1 no `asks`).
Facts that hold several values are one JSON object each (one attribute costs a producer
far more than its bytes); members without a value are left out.

attribute                               type      on / meaning
--------------------------------------  --------  -------------------------------------------
pathgrade.facts.version                 int       every span with facts: the contract version
pathgrade.facts.tool.args               string    execute_tool spans, JSON:
                                        (JSON)    `fp`: fingerprint of the canonical arguments
                                                  (`predicates.call_arguments`; of the raw
                                                  text when they are not a JSON object);
                                                  `args`: {argument name: fingerprint of its
                                                  value} (absent when not an object);
                                                  `skeleton`: `predicates.argument_skeleton`
                                                  (keys, JSON types, lengths; no values)
pathgrade.facts.session.fp              string    span with a session identity
                                                  (`conventions.session_identity`): its
                                                  fingerprint
pathgrade.facts.confirmed               string    span with `pathgrade.confirmed_action`, JSON:
                                        (JSON)    `name` (the confirmed tool), `fp` and `args`
                                                  of its arguments as for tool.args
pathgrade.facts.untrusted.instructions  string[]  span with content the user did not type (a
                                                  tool result, retrieval documents, tool
                                                  messages or document parts of input
                                                  messages): `INSTRUCTION_LEXICON` names found
                                                  in it; [] = checked, none found
pathgrade.facts.output                  string    span with output messages, JSON:
                                        (JSON)    `text`: they hold a non-blank assistant text
                                                  (bool); `tool_calls`: [{"id", "name", "fp",
                                                  "args"}] they request (`fp` and `args` as
                                                  in tool.args, when the call's arguments are
                                                  an object, version 3: what a tool span that
                                                  does not name its arguments is read by);
                                                  `finish_reasons`; `claims`:
                                                  `CLAIM_LEXICON` names claimed in the text;
                                                  `pii`: {kind: count} of personal data in the
                                                  text (`schemas.personal_data` kinds); `asks`:
                                                  `ASK_LEXICON` slots the text asks the user
                                                  for (version 2)
pathgrade.facts.pii.scrubbed            string    JSON {field: {kind: count}}: personal data the
                                                  collector replaced in fields it forwarded
pathgrade.facts.pii.dropped             string    JSON {field: {kind: count}}: personal data in
                                                  content fields it dropped
pathgrade.facts.requests                string    span whose input messages hold a user message,
                                        (JSON)    when the collector has request patterns (a
                                                  policy's `requests`,
                                                  `predicates.RequestPatterns`): {write tool:
                                                  whether the request (the last user message)
                                                  asks for it}, for every tool it has
                                                  patterns for

Fingerprints are `content.fingerprints` fingerprints (`<key id>:<digest>`) of the tenant's
key. Names and ids in facts are scrubbed like every forwarded string. Fields of the pii
records are attribute keys (`resource:`, `scope:`, `link:` prefixed for those, and
`event:<event name>:<key>` for event attributes), and `name`, `status.message`,
`trace_state`, `link.trace_state`, `event.name`, `scope.name`, `scope.version`,
`schema_url`, `scope.schema_url` for the strings that are not attributes. Values arrive as
OTLP types from Kafka and as the stored text from ClickHouse; `span_facts` reads both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from pathgrade.schemas import genai as g
from pathgrade.schemas.json_text import parse_json
from pathgrade.schemas.personal_data import Counts

PiiRecord = dict[str, Counts]
"""Field -> kind of personal data -> count."""

FACTS_VERSION: Final = 3
_P = g.PG_FACTS_PREFIX
VERSION: Final = _P + "version"
TOOL_ARGS: Final = _P + "tool.args"
SESSION_FP: Final = _P + "session.fp"
CONFIRMED: Final = _P + "confirmed"
UNTRUSTED_INSTRUCTIONS: Final = _P + "untrusted.instructions"
OUTPUT: Final = _P + "output"
PII_SCRUBBED: Final = _P + "pii.scrubbed"
PII_DROPPED: Final = _P + "pii.dropped"
REQUESTS: Final = _P + "requests"
FACT_KEYS: Final = frozenset(
    {VERSION, TOOL_ARGS, SESSION_FP, CONFIRMED, UNTRUSTED_INSTRUCTIONS, OUTPUT, PII_SCRUBBED,
     PII_DROPPED, REQUESTS}
)  # fmt: skip


# The facts are named tuples: immutable like frozen dataclasses, and built for every span
# with facts at a fraction of their cost (a frozen dataclass sets each field through
# object.__setattr__). Their dicts are read-only (NO_FACTS' are every such span's).


class ArgumentFacts(NamedTuple):
    """Fingerprints (and skeleton) of one argument object."""

    fingerprint: str  # of the whole object
    fingerprints: dict[str, str] | None  # argument name -> fingerprint of its value
    skeleton: dict[str, Any] | None = None


class OutputFacts(NamedTuple):
    """What a span's output messages said, without saying it."""

    has_text: bool
    tool_call_ids: tuple[str, ...]
    tool_call_names: tuple[str, ...]
    finish_reasons: tuple[str, ...]
    claims: tuple[str, ...]
    pii: Counts
    asks: tuple[str, ...] = ()  # slots the text asks the user for (`ASK_LEXICON`)
    tool_call_arguments: tuple[ArgumentFacts | None, ...] = ()  # of each call (None: none)


class SpanFacts(NamedTuple):
    """The `pathgrade.facts.*` attributes of one span, parsed (`span_facts`)."""

    version: int  # 0: the span carries no facts
    arguments: ArgumentFacts | None
    session: str  # fingerprint of the session identity
    confirmed_name: str
    confirmed: ArgumentFacts | None
    instructions: tuple[str, ...] | None  # None: no untrusted content was checked
    output: OutputFacts | None
    pii_scrubbed: PiiRecord
    pii_dropped: PiiRecord
    requests: dict[str, bool] | None = None  # write tool -> asked for; None: not checked


NO_FACTS: Final = SpanFacts(0, None, "", "", None, None, None, {}, {})


def span_facts(attributes: Mapping[str, Any]) -> SpanFacts:
    """The facts among a span's attributes (OTLP values or their stored text)."""
    if FACT_KEYS.isdisjoint(attributes):  # most spans of foreign producers: nothing to read
        return NO_FACTS
    get = attributes.get
    # Each fact is read only when present: a span carries a few of the nine (a tool
    # span its arguments, a model span its output), and reading an absent one costs
    # several calls for the default it yields.
    tool_args, confirmed, instructions, output, scrubbed, dropped, requests = (
        get(TOOL_ARGS), get(CONFIRMED), get(UNTRUSTED_INSTRUCTIONS), get(OUTPUT),
        get(PII_SCRUBBED), get(PII_DROPPED), get(REQUESTS),
    )  # fmt: skip
    confirmed_object = _object(confirmed) if confirmed is not None else {}
    return SpanFacts(  # positional, in field order: version, arguments, session, confirmed
        # name, confirmed, instructions, output, pii scrubbed, pii dropped, requests
        _int(get(VERSION)),
        argument_facts(_object(tool_args)) if tool_args is not None else None,
        _text(get(SESSION_FP)),
        _text(confirmed_object.get("name")),
        argument_facts(confirmed_object) if confirmed is not None else None,
        None if instructions is None else _strings(instructions),
        _output(output) if output is not None else None,
        _record(scrubbed) if scrubbed is not None else {},
        _record(dropped) if dropped is not None else {},
        _asked(requests) if requests is not None else None,
    )


def merged_facts(own: SpanFacts, carried: list[SpanFacts]) -> SpanFacts:
    """A span's facts with those its log records carry (`Span.records`: an inference's
    messages, a tool message, a choice as records), as one set: what the span says of
    itself first (arguments, session, confirmation), instruction hits and personal-data
    records of all, outputs as one (a record per choice: any text, every tool call, finish
    reason, claim and ask, the personal data summed), requests asked by any."""
    with_facts = [f for f in carried if f.version]
    if not with_facts:
        return own
    every = [own, *with_facts]
    outputs = [f.output for f in every if f.output is not None]
    hits = [f.instructions for f in every if f.instructions is not None]
    asked = [f.requests for f in every if f.requests is not None]
    return SpanFacts(
        version=max(f.version for f in every),
        arguments=next((f.arguments for f in every if f.arguments is not None), None),
        session=next((f.session for f in every if f.session), ""),
        confirmed_name=next((f.confirmed_name for f in every if f.confirmed_name), ""),
        confirmed=next((f.confirmed for f in every if f.confirmed is not None), None),
        instructions=tuple(dict.fromkeys(n for h in hits for n in h)) if hits else None,
        output=_merged_outputs(outputs) if outputs else None,
        pii_scrubbed=_merged_records([f.pii_scrubbed for f in every]),
        pii_dropped=_merged_records([f.pii_dropped for f in every]),
        requests={t: any(a.get(t, False) for a in asked) for r in asked for t in r}
        if asked
        else None,
    )


def _merged_outputs(outputs: list[OutputFacts]) -> OutputFacts:
    if len(outputs) == 1:
        return outputs[0]
    pii: Counts = {}
    for output in outputs:
        for kind, count in output.pii.items():
            pii[kind] = pii.get(kind, 0) + count
    return OutputFacts(
        has_text=any(o.has_text for o in outputs),
        tool_call_ids=tuple(i for o in outputs for i in o.tool_call_ids),
        tool_call_names=tuple(n for o in outputs for n in o.tool_call_names),
        tool_call_arguments=tuple(a for o in outputs for a in o.tool_call_arguments),
        finish_reasons=tuple(r for o in outputs for r in o.finish_reasons),
        claims=tuple(dict.fromkeys(c for o in outputs for c in o.claims)),
        pii=pii,
        asks=tuple(dict.fromkeys(a for o in outputs for a in o.asks)),
    )


def _merged_records(records: list[PiiRecord]) -> PiiRecord:
    merged: PiiRecord = {}
    for record in records:
        for field, kinds in record.items():
            into = merged.setdefault(field, {})
            for kind, count in kinds.items():
                into[kind] = into.get(kind, 0) + count
    return merged


def argument_facts(value: Mapping[str, Any]) -> ArgumentFacts | None:
    """An `fp`/`args`/`skeleton` object as ArgumentFacts; None without a fingerprint."""
    whole = _text(value.get("fp"))
    if not whole:
        return None
    args = value.get("args")
    fingerprints = (
        {str(k): v for k, v in args.items() if isinstance(v, str)}
        if isinstance(args, dict)
        else None
    )
    skeleton = value.get("skeleton")
    return ArgumentFacts(whole, fingerprints, skeleton if isinstance(skeleton, dict) else None)


def _output(value: Any) -> OutputFacts | None:
    output = _object(value)
    if "text" not in output:
        return None
    get = output.get
    calls = [c for c in get("tool_calls") or () if isinstance(c, dict)]
    return OutputFacts(  # positional, in field order; tuples of lists (not of generators)
        output["text"] is True,
        tuple([_text(c.get("id")) for c in calls]),
        tuple([_text(c.get("name")) for c in calls]),
        _strings(get("finish_reasons")),
        _strings(get("claims")),
        _counts(get("pii")),
        _strings(get("asks")),
        tuple([argument_facts(c) for c in calls]),
    )


def _object(value: Any) -> dict[str, Any]:
    parsed = parse_json(value) if isinstance(value, str) else value
    return parsed if isinstance(parsed, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _strings(value: Any) -> tuple[str, ...]:
    """A string array: an OTLP array, or its stored JSON text."""
    if isinstance(value, str):
        value = parse_json(value)
    if isinstance(value, list | tuple):
        return tuple(map(str, value))
    return ()


def _counts(value: Any) -> Counts:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and v > 0}


def _asked(value: Any) -> dict[str, bool]:
    return {str(k): v for k, v in _object(value).items() if isinstance(v, bool)}


def _record(value: Any) -> PiiRecord:
    return {str(f): _counts(kinds) for f, kinds in _object(value).items()}
