"""How many generated examples a property test runs.

The suite runs each generated (hypothesis) test on a fixed, derandomized set of examples
sized to keep the whole suite within its time; `PATHGRADE_EXAMPLES_SCALE` multiplies every
count for a deeper run (`PATHGRADE_EXAMPLES_SCALE=10 pytest tests/unit/content`).
"""

import os

SCALE_VARIABLE = "PATHGRADE_EXAMPLES_SCALE"


def examples(count: int) -> int:
    """`count` scaled by PATHGRADE_EXAMPLES_SCALE (1 when unset), at least 1."""
    text = os.environ.get(SCALE_VARIABLE, "1")
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not scale > 0:
        raise ValueError(f"{SCALE_VARIABLE}={text!r}: must be a positive number")
    return max(1, round(count * scale))
