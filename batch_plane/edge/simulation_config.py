"""`SimulationConfig`: the settings of one `edge run` (a light module: the command line
reads its fields' defaults and descriptions for the flags)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SimulationConfig(BaseModel):
    """How many runs per scenario, restarts, the seed and the ids written on the spans.
    A bad value is a ValueError (pydantic's ValidationError) naming the field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(description="id written on every span (`pathgrade.run.id`)")
    replays: int = Field(3, description="exact replays per scenario (R)")
    variants: int = Field(2, description="persona variants per scenario (V)")
    max_restarts: int = Field(2, description="restarts after a deviation (B)")
    seed: int = Field(0, description="seed of the user and agent draws")
    suite_version: str = Field("", description="value of `pathgrade.suite.version`")

    @model_validator(mode="after")
    def _counts(self) -> SimulationConfig:
        for name in ("replays", "variants", "max_restarts"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.replays < 1:
            raise ValueError(f"replays: must be at least 1, got {self.replays}")
        if not self.run_id:
            raise ValueError("run_id: must not be empty")
        return self
