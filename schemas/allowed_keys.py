"""Which attribute values the collector forwards as text: the allow-list (as the OpenTelemetry
Collector's redaction processor does with `allowed_keys`), as data; the collector matches
keys against it (`collector.allow_list`).

An attribute whose key is allowed is forwarded with its value scrubbed (`content.pii`); any
other value is withheld: it travels as its mark (`content.withheld`: type, keyed
fingerprint, kinds of personal data found), never as its text, whatever it holds. A
boolean travels as it is (one bit holds no text), and so does an empty string.

Allowed by default: the structural keys of the conventions pathgrade reads (the keys the
GenAI mapping reads names, ids, counts and kinds from, `schemas.genai_mapping`), a small
set of OpenTelemetry semantic-convention keys that name what ran (service, SDK, HTTP
method, route and status, RPC, database system and operation, error and exception
types), and pathgrade's own `pathgrade.*` hints; a deployment adds its own keys
(`RedactionConfig.allowed_keys`: exact keys, or patterns with `*`, `?` and `[...]` as in
`fnmatch`). Free text is not allowed by default (descriptions, queries, URLs, exception
messages and stack traces, prompts' metadata), nor is a span's status message
(`STATUS_MESSAGE_FIELD`, which `allowed_keys` may name).

Identifiers among the allowed keys (`IDENTIFIER_KEYS`: conversation, session, tool-call,
response and run ids...) are forwarded as they are when scrubbing leaves them unchanged,
else as their keyed fingerprint (never a shared mark: two users' ids stay two).

An attribute key is forwarded as it is when it looks like a key (`KEY_SHAPE`: ASCII letters,
digits and `_ . - / : [ ] # $ +`, at most 256 characters) and scrubbing leaves it unchanged;
any other key is withheld like a value (type `key`).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from pathgrade.schemas import genai as g
from pathgrade.schemas import genai_mapping as mapping
from pathgrade.schemas.genai_versions import ATTRIBUTE_RENAMES

STATUS_MESSAGE_FIELD: Final = "status.message"
"""The name `allowed_keys` gives a span's status message (withheld unless allowed)."""
EVENT_NAME: Final = "event.name"
"""Where a log record names its event when the SDK predates the record's own field."""
KEY_SHAPE: Final = r"[A-Za-z0-9_.\-/:\[\]#$+]{1,256}"
"""The shape of an attribute key forwarded as it is (a regular expression, matched whole)."""


class AllowedGroup(NamedTuple):
    """Allowed keys of one source: exact keys, and prefixes (a key starting with one)."""

    source: str
    keys: frozenset[str]
    prefixes: tuple[str, ...] = ()


GROUPS: Final = (
    AllowedGroup(
        "GenAI semantic conventions (and their deprecated aliases)",
        frozenset(
            {
                g.OPERATION_NAME, g.PROVIDER_NAME, g.AGENT_NAME, g.AGENT_ID, g.AGENT_VERSION,
                g.WORKFLOW_NAME, g.WORKFLOW_NODES, g.WORKFLOW_EDGES, g.TASK_NAME, g.TOOL_NAME,
                g.TOOL_CALL_ID, g.TOOL_TYPE, g.TOOL_CALL_DECISION_OUTCOME, g.CONVERSATION_ID,
                g.DATA_SOURCE_ID,
                g.REQUEST_MODEL, g.RESPONSE_MODEL, g.RESPONSE_ID, g.RESPONSE_FINISH_REASONS,
                g.SYSTEM_DEPRECATED, "gen_ai.output.type", g.EVALUATION_NAME,
                g.EVALUATION_SCORE_VALUE, g.EVALUATION_SCORE_LABEL,
                g.TOOL_CALL_DECISION_OUTCOME,
                *ATTRIBUTE_RENAMES,
            }
        ),
        ("gen_ai.usage.", "gen_ai.request.", "gen_ai.openai.request."),
    ),
    AllowedGroup(
        "the conventions' structural keys as the GenAI mapping reads them (OpenInference, "
        "OpenLLMetry)",
        frozenset(
            {
                *mapping.PROVIDER_KEYS, *mapping.AGENT_NAME_KEYS, *mapping.TOOL_NAME_KEYS,
                *mapping.TOOL_CALL_ID_KEYS, *mapping.CONVERSATION_KEYS,
                *mapping.REQUEST_MODEL_KEYS, *mapping.RESPONSE_MODEL_KEYS,
                *mapping.INPUT_TOKEN_KEYS, *mapping.OUTPUT_TOKEN_KEYS,
                *mapping.TOTAL_TOKEN_KEYS, *mapping.FINISH_REASON_KEYS,
                *(source.key for source in mapping.OPERATION_SOURCES),
                g.TL_ENTITY_NAME, g.TL_WORKFLOW_NAME, g.TL_LANGGRAPH_NODE,
                g.OI_TOOL_CALL_FUNCTION_NAME, "llm.is_streaming",
            }
        ),
        ("llm.token_count.", "llm.usage."),
    ),
    AllowedGroup(
        "OpenTelemetry semantic conventions: what ran, where, and how it ended",
        frozenset(
            {
                g.SERVICE_NAME, EVENT_NAME, "service.version", "service.namespace",
                "service.instance.id",
                "deployment.environment", "deployment.environment.name",
                "telemetry.auto.version", "otel.scope.name", "otel.scope.version",
                "otel.status_code", g.ERROR_TYPE, "exception.type", "exception.escaped",
                "http.request.method", "http.response.status_code", "http.route",
                "http.method", "http.status_code", "url.scheme", "server.address",
                "server.port", "network.protocol.name", "network.protocol.version",
                "network.transport", "db.system", "db.system.name", "db.operation.name",
                "db.collection.name", "db.namespace", "messaging.system",
                "messaging.operation.type", "messaging.destination.name",
                "process.runtime.name", "process.runtime.version", "os.type", "host.arch",
            }
        ),
        ("telemetry.sdk.", "telemetry.distro.", "rpc."),
    ),
    AllowedGroup("pathgrade's own hints and facts", frozenset(), ("pathgrade.",)),
)  # fmt: skip
"""The default allow-list, by source (docs/collector.md lists it, generated from here)."""

DEFAULT_KEYS: Final = frozenset().union(*(group.keys for group in GROUPS))
DEFAULT_PREFIXES: Final = tuple(p for group in GROUPS for p in group.prefixes)

ALLOWED_MEMBERS: Final = {
    g.OI_METADATA: frozenset(
        {
            "langgraph_node", "langgraph_step", "langgraph_triggers", "langgraph_path",
            "ls_integration", "ls_provider", "ls_model_name", "ls_model_type",
        }
    ),
}  # fmt: skip
"""Keys whose value is a JSON object holding structure beside free text (OpenInference's
`metadata`: LangChain and LangGraph name the graph node, step and integration there): only
these members travel (scrubbed, when they are texts, numbers or lists of them); the rest is
dropped."""

IDENTIFIER_KEYS: Final = frozenset(
    {
        *mapping.CONVERSATION_KEYS, *mapping.TOOL_CALL_ID_KEYS, g.RESPONSE_ID, g.AGENT_ID,
        g.DATA_SOURCE_ID, "service.instance.id", g.PG_DATASET_ITEM_ID, g.PG_RUN_ID,
        g.PG_VARIANT_ID, g.PG_IDEMPOTENCY_KEY,
    }
)  # fmt: skip
"""Allowed keys whose values are identifiers: forwarded as their fingerprint when scrubbing
would change them."""
