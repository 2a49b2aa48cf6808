"""The demo agent: seeded scenarios of a small customer-support agent (`scenarios`), one
attribute writer per tracing convention (`writers`: GenAI, OpenInference, OpenLLMetry) and
the sender that emits them over OTLP through the official SDK (`sender`); `options`,
what `pathgrade demo` sends by default.

Inside, arrows point one way: sender -> writers -> scenarios, and both to options. The
room imports `schemas` only (and OpenTelemetry's SDK, pydantic)."""
