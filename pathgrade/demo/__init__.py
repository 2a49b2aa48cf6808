"""The demo agent: seeded scenarios of a small customer-support agent (`scenarios`), one
attribute writer per tracing convention (`writers`: GenAI, OpenInference, OpenLLMetry) and
the sender that emits them over OTLP through the official SDK (`sender`).

Inside, arrows point one way: sender -> writers -> scenarios. The room imports `schemas`
only (and OpenTelemetry's SDK)."""
