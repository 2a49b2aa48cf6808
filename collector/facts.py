"""The collector's facts: the deployment's fact secret, computing one span's facts from its
raw values (`schemas.facts_producer`), and writing facts onto an OTLP span."""

from __future__ import annotations

from collections.abc import Mapping, MutableSequence
from pathlib import Path
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from pathgrade.schemas import genai
from pathgrade.schemas.conventions import NOT_REBUILT, ContentView, content_view
from pathgrade.schemas.facts import (
    FACT_KEYS,
    FACTS_VERSION,
    PII_DROPPED,
    PII_SCRUBBED,
    VERSION,
    PiiRecord,
)
from pathgrade.schemas.facts_producer import (
    compute_facts,
    instructions_in_messages,
    joined_hits,
    pii_record_text,
)
from pathgrade.schemas.fingerprints import KEY_FILE_NAME, FactSecret
from pathgrade.schemas.messages import GrowingArrays
from pathgrade.schemas.model import GenAIFields
from pathgrade.schemas.pii import PiiScanner


def load_secret(key_file: Path | None, spill_dir: Path) -> FactSecret:
    """The fact secret: from `key_file` (which must exist), else from the spill directory's
    `facts.key`, created with a fresh secret the first time. ValueError names the file."""
    if key_file is not None:
        return FactSecret.from_file(key_file)
    return FactSecret.load_or_create(spill_dir / KEY_FILE_NAME)


_NO_CONTENT: ContentView = (GenAIFields(), NOT_REBUILT)


class FactMaker:
    """Computes the facts of one span from its raw attribute values, per tenant. A trace's
    model calls repeat the conversation so far in their input: what was found in the
    earlier messages is remembered per trace (bounded), and only new ones are read."""

    def __init__(self, secret: FactSecret, scanner: PiiScanner) -> None:
        self.secret = secret
        self.scanner = scanner
        self._inputs = GrowingArrays(instructions_in_messages, joined_hits)

    def facts(
        self, span_name: str, raw: Mapping[str, Any], tenant: str, trace_id: bytes = b""
    ) -> dict[str, Any]:
        """The fact attributes of a span named `span_name` with attributes `raw` (only the
        ones facts read need be given: content, identity and the span's kind keys), of
        trace `trace_id`."""
        # Only the identity or a confirmation (a root span): no GenAI view is needed.
        needs_fields = any(k not in genai.PRIVATE_KEYS and genai.is_content_key(k) for k in raw)
        fields, rebuilt = content_view(span_name, raw) if needs_fields else _NO_CONTENT
        key = self.secret.for_tenant(tenant)
        inputs = self._inputs
        return compute_facts(
            fields, raw, key, self.scanner, lambda text: inputs((tenant, trace_id), text), rebuilt
        )


def write_facts(
    attributes: MutableSequence[KeyValue],
    facts: Mapping[str, Any],
    scrubbed: PiiRecord,
    dropped: PiiRecord,
    producer_facts: bool = True,
) -> None:
    """Write the span's computed `facts` (replacing every `pathgrade.facts.*` attribute a
    producer set: the collector's are one consistent set) and the pii records (replacing
    only those), when there is anything to write at all. `producer_facts` False: the
    caller saw no fact attribute on the span, so none is looked for."""
    if not (facts or scrubbed or dropped):
        return
    values = dict(facts)
    values[VERSION] = FACTS_VERSION
    if scrubbed:
        values[PII_SCRUBBED] = pii_record_text(scrubbed)
    if dropped:
        values[PII_DROPPED] = pii_record_text(dropped)
    if producer_facts:
        replaced = FACT_KEYS if facts else values.keys()
        stale = [i for i, kv in enumerate(attributes) if kv.key in replaced]
        for index in reversed(stale):
            del attributes[index]
    for key, value in values.items():
        _set_value(attributes.add(key=key).value, value)


def _set_value(target: AnyValue, value: Any) -> None:
    """Set an AnyValue (made in place: cheaper than building and copying one) from a
    fact's value: str, bool, int, or a list of strings (an empty list is a value too:
    "checked, none")."""
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    else:
        array = target.array_value
        array.SetInParent()
        for item in value:
            array.values.add().string_value = item
