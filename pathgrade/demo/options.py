"""`DemoOptions`: what `pathgrade demo` sends, with its defaults and descriptions (the
command line's help and `run_demo`'s defaults read them; a light module, no SDK)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Flavor = Literal["genai", "openinference", "openllmetry"]
"""The tracing conventions the demo agent writes (`writers.WRITERS`)."""


class DemoOptions(BaseModel):
    """Options of `pathgrade demo`, besides where and with which token it sends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    traces: int = Field(50, description="demo traces to send")
    seed: int = Field(7, description="seed of the demo agent's scenarios")
    flavor: Flavor = Field(
        "genai",
        description="tracing convention of the spans: GenAI semantic conventions, "
        "OpenInference or OpenLLMetry",
    )


DEMO_DEFAULTS = DemoOptions()
