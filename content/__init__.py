"""Algorithms over span content, above the definitions in `schemas`: decoding OTLP into the
canonical model (`otlp`, `otlp_logs`, and the C reader `_otlp_reader`), mapping every
convention onto the GenAI view (`conventions`), reading messages and events (`messages`,
`events`, `event_content`), finding personal data (`pii`), content predicates
(`predicates`), keyed fingerprints and withheld marks (`fingerprints`, `withheld`),
computing facts (`facts_producer`), the agent turns, graph walks and hand-offs of a trace
(`agent_turns`, `graph_walk`, `handoffs`), what a turn brings to a monitor rollup
(`turn_rollups`), total number parsing (`numbers`), and the
hot path's bounded memory (`memo`).

Imports `schemas` and nothing else of pathgrade's own; of other libraries only
opentelemetry-proto (and its protobuf runtime).
"""
