"""How pathgrade marks the data its demo creates, so `pathgrade demo clean` finds all of it
and nothing else.

- Spans: every span the demo sends (`pathgrade up --demo`'s live traffic, `pathgrade
  demo`, the demo's eval and EDGE runs) carries the resource attribute `pathgrade.demo`
  = `true`. A trace with such a span is a demo trace; its alerts and scores are demo rows,
  and so is every run whose traces are demo traces, with its scores and the gates that
  compare it.
- Datasets: the demo's datasets are owned by `pathgrade-demo`.
"""

from __future__ import annotations

DEMO_RESOURCE_KEY = "pathgrade.demo"
DEMO_RESOURCE_VALUE = "true"
DEMO_RESOURCE_ATTRIBUTES = {DEMO_RESOURCE_KEY: DEMO_RESOURCE_VALUE}
"""The resource attribute on every span the demo sends."""
DEMO_OWNER = "pathgrade-demo"
"""The owner of the demo's datasets."""
