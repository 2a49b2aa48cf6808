"""Computing facts (`schemas.facts`) from a span's raw content: what the collector runs
on every span before it drops or scrubs anything, and what any producer may run to set
the same attributes itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pathgrade.content.conventions import NOT_REBUILT, RebuiltMessages, session_identity
from pathgrade.content.fingerprints import TenantKey
from pathgrade.content.memo import BoundedMemo
from pathgrade.content.messages import (
    answer_text,
    parse_messages,
    request_text,
    requested_calls,
    untrusted_texts,
)
from pathgrade.content.pii import PiiScanner
from pathgrade.content.predicates import (
    ASKS,
    CLAIMS,
    INSTRUCTIONS,
    RequestPatterns,
    argument_skeleton,
    call_arguments,
    requested_arguments,
)
from pathgrade.schemas import genai as g
from pathgrade.schemas.facts import (
    CONFIRMED,
    FACTS_VERSION,
    OUTPUT,
    REQUESTS,
    SESSION_FP,
    TOOL_ARGS,
    UNTRUSTED_INSTRUCTIONS,
    VERSION,
    PiiRecord,
)
from pathgrade.schemas.json_text import parse_json, sorted_compact
from pathgrade.schemas.model import GenAIFields

# Raw text that may hold untrusted parts (tool messages, document/file/tool-response parts).
UNTRUSTED_MARKERS = ('"tool"', '"tool_call_response"', '"document"', '"file"')
# Facts of arguments and of output messages, remembered (bounded) by their text: calls
# repeat their arguments, answers their words.
_REMEMBERED: Final = 4096
_REMEMBERED_CHARS: Final = 1024
_remembered: BoundedMemo[tuple[Any, ...], str] = BoundedMemo(_REMEMBERED)


def compute_facts(
    fields: GenAIFields,
    attributes: Mapping[str, Any],
    key: TenantKey,
    scanner: PiiScanner,
    input_instructions: Callable[[str], list[str] | None] | None = None,
    rebuilt: RebuiltMessages = NOT_REBUILT,
    requests: RequestPatterns | None = None,
) -> dict[str, Any]:
    """The fact attributes of one span from its canonical fields and raw attributes, with
    the tenant's `key`; `scanner` scrubs the names and ids facts carry and finds personal
    data in the answer text; `input_instructions` stands for `instructions_in_messages`
    on the input messages (a caller that remembers a conversation's earlier inputs);
    `rebuilt`: the messages `fields` holds no text of (`conventions.content_view`);
    `requests`: the policy's request patterns, matched on the turn's request.
    {} when the span has nothing to record."""
    clean = scanner.clean
    facts: dict[str, Any] = {}
    if fields.operation == g.OP_EXECUTE_TOOL and fields.tool_arguments:
        arguments_text = fields.tool_arguments
        facts[TOOL_ARGS] = _remembered_text(
            ("arguments", key, scanner, arguments_text),
            lambda: sorted_compact(_arguments(arguments_text, key, clean, skeleton=True)),
        )
    identity = session_identity(attributes)
    if identity:
        facts[SESSION_FP] = key.fingerprint(identity)
    raw_confirmation = attributes.get(g.PG_CONFIRMED_ACTION)
    confirmed = parse_json(raw_confirmation) if isinstance(raw_confirmation, str) else None
    if isinstance(confirmed, dict) and isinstance(confirmed.get("name"), str):
        arguments = confirmed.get("arguments")
        text = sorted_compact(arguments if isinstance(arguments, dict) else {})
        facts[CONFIRMED] = sorted_compact(
            {"name": clean(confirmed["name"]), **_arguments(text, key, clean)}
        )
    instructions = _untrusted_instructions(
        fields, attributes, input_instructions or instructions_in_messages, rebuilt.inputs
    )
    if instructions is not None:
        facts[UNTRUSTED_INSTRUCTIONS] = instructions
    if requests:
        asked = requested_writes(fields, rebuilt, requests)
        if asked is not None:
            facts[REQUESTS] = sorted_compact(asked)
    if fields.output_messages:
        output_text = fields.output_messages
        facts[OUTPUT] = _remembered_text(
            ("output", key, scanner, output_text, *fields.finish_reasons),
            lambda: _output_fact(parse_messages(output_text), fields.finish_reasons, key, scanner),
        )
    elif rebuilt.outputs:
        facts[OUTPUT] = _output_fact(rebuilt.outputs, fields.finish_reasons, key, scanner)
    if facts:
        facts[VERSION] = FACTS_VERSION
    return facts


def _remembered_text(memo_key: tuple[Any, ...], make: Callable[[], str]) -> str:
    """`make()`, remembered under `memo_key` (a tag, then what the text is made of) when
    the key's strings are short."""
    known = _remembered.get(memo_key)
    if known is not None:
        return known
    made = make()
    if sum(len(k) for k in memo_key if isinstance(k, str)) <= _REMEMBERED_CHARS:
        _remembered.put(memo_key, made)
    return made


def _arguments(text: str, key: TenantKey, clean: Any, skeleton: bool = False) -> dict[str, Any]:
    """`fp`, `args` (and `skeleton`) of the arguments in JSON `text`; names scrubbed."""
    arguments = call_arguments(text)
    if arguments is None:
        shape = {"skeleton": argument_skeleton(text)} if skeleton else {}
        return {"fp": key.fingerprint(text), **shape}
    facts = _object_arguments(arguments, key, clean)
    if skeleton:
        facts["skeleton"] = argument_skeleton(arguments, name=clean)
    return facts


def _object_arguments(arguments: dict[str, Any], key: TenantKey, clean: Any) -> dict[str, Any]:
    """`fp` and `args` of an arguments object; names scrubbed."""
    return {
        "fp": key.fingerprint(arguments),
        "args": {clean(name): key.fingerprint(value) for name, value in arguments.items()},
    }


def _untrusted_instructions(
    fields: GenAIFields,
    attributes: Mapping[str, Any],
    in_inputs: Callable[[str], list[str] | None],
    rebuilt_inputs: list[dict[str, Any]],
) -> list[str] | None:
    """Lexicon names in the span's untrusted content; None when it has none."""
    found: list[str] | None = None
    if fields.operation == g.OP_EXECUTE_TOOL and fields.tool_result:
        found = INSTRUCTIONS.hits(fields.tool_result)
    documents = attributes.get(g.RETRIEVAL_DOCUMENTS)
    if documents:
        found = (found or []) + INSTRUCTIONS.hits(
            documents if isinstance(documents, str) else str(documents)
        )
    if fields.operation in g.MODEL_OPERATIONS and (fields.input_messages or rebuilt_inputs):
        in_messages = (
            in_inputs(fields.input_messages)
            if fields.input_messages
            else instructions_in(rebuilt_inputs)
        )
        if in_messages is not None:
            found = (found or []) + in_messages
    if found is None:
        return None
    return [name for name in INSTRUCTIONS.expressions if name in found]


def requested_writes(
    fields: GenAIFields, rebuilt: RebuiltMessages, requests: RequestPatterns
) -> dict[str, bool] | None:
    """For each write tool `requests` has patterns for, whether the span's request (the
    last user message of its input messages) asks for it; None when its input holds no
    user message. The one definition the collector's fact and the detectors share."""
    messages = parse_messages(fields.input_messages) if fields.input_messages else rebuilt.inputs
    request = request_text(messages)
    return requests.asked(request) if request else None


def instructions_in_messages(text: str) -> list[str] | None:
    """Lexicon names in the untrusted parts of JSON messages; None when they have none.
    Messages are parsed only when they may hold such parts."""
    if not any(marker in text for marker in UNTRUSTED_MARKERS):
        return None
    return instructions_in(parse_messages(text))


def instructions_in(messages: list[dict[str, Any]]) -> list[str] | None:
    """Lexicon names in the untrusted parts of message objects; None when they have none."""
    texts = [t for m in messages for t in untrusted_texts(m)]
    return [name for t in texts for name in INSTRUCTIONS.hits(t)] if texts else None


def _output_fact(
    messages: list[dict[str, Any]], finish_reasons: list[str], key: TenantKey, scanner: PiiScanner
) -> str:
    """The output fact (JSON text) of a model call's output messages. A tool call's id is
    an identifier: as it is, or its fingerprint when scrubbing would change it (so two
    calls stay two, and match their tool spans' ids, which the collector treats alike);
    its arguments, when they are an object, travel as `fp` and `args` (as tool.args), for a
    tool span that does not name its own."""
    calls = requested_calls(messages)
    text = answer_text(messages)
    facts: dict[str, Any] = {"text": bool(text.strip())}
    if calls:
        clean = scanner.clean
        facts["tool_calls"] = [
            {
                "id": _identifier(c.call_id, key, scanner),
                "name": clean(c.name),
                **_requested_arguments(c.arguments, key, clean),
            }
            for c in calls
        ]
    if finish_reasons:
        facts["finish_reasons"] = [scanner.clean(r) for r in finish_reasons]
    claims = CLAIMS.hits(text)
    if claims:
        facts["claims"] = claims
    asks = ASKS.hits(text)
    if asks:
        facts["asks"] = asks
    pii = scanner.find(text)
    if pii:
        facts["pii"] = pii
    return sorted_compact(facts)


def _requested_arguments(value: Any, key: TenantKey, clean: Any) -> dict[str, Any]:
    """`fp` and `args` of a requested call's arguments; {} when they are not an object."""
    arguments = requested_arguments(value)
    return {} if arguments is None else _object_arguments(arguments, key, clean)


def _identifier(text: str, key: TenantKey, scanner: PiiScanner) -> str:
    """An id as it travels: itself, or its fingerprint when scrubbing would change it."""
    return key.fingerprint(text) if scanner.scrub(text)[1] else text


def joined_hits(earlier: list[str] | None, later: list[str] | None) -> list[str] | None:
    """`instructions_in_messages` of two runs of messages, as of all of them."""
    if earlier is None and later is None:
        return None
    return (earlier or []) + (later or [])


def pii_record_text(record: PiiRecord) -> str:
    """A pii record's attribute value (JSON, sorted)."""
    return sorted_compact(record)
