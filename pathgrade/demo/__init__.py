"""The demo agent: seeded scenarios of a small customer-support agent (`scenarios`), one
attribute writer per tracing convention (`writers`: GenAI, OpenInference, OpenLLMetry) and
the sender that emits them over OTLP through the official SDK (`sender`); `options`,
what `pathgrade demo` sends by default; `pages`, what `pathgrade up --demo` puts on the
browser UI's other pages by running pathgrade's own commands (a dataset, runs, a gate, a
triaged regression item, an EDGE run).

Inside, arrows point one way: pages -> sender -> writers -> scenarios, and all to options.
The room imports `schemas` only (and OpenTelemetry's SDK, pydantic); `pages` reaches the
rest of pathgrade through its commands, never by import."""
