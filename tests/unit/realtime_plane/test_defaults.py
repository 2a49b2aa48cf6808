"""An assembler or evaluator built without settings (a bench, a test, an embedding) holds,
waits and remembers as `pathgrade realtime` does with none: their defaults are the realtime
plane's documented settings (RealtimeConfig, docs/realtime.md's table)."""

from __future__ import annotations

import inspect

from pathgrade.realtime_plane.assembler import AssemblerStats, TurnAssembler
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.evaluate import TurnEvaluator

DEFAULTS = RealtimeConfig(bootstrap_servers="k:9092")


def test_the_assemblers_defaults_are_the_planes() -> None:
    names = ("quiet_window_s", "max_age_s", "max_traces", "max_spans", "recent_traces",
             "parent_wait_s", "recent_spans")  # fmt: skip
    assembler = TurnAssembler()
    assert {n: getattr(assembler, n) for n in names} == {n: getattr(DEFAULTS, n) for n in names}
    assert assembler.stats == AssemblerStats(0, 0, 0, 0, 0, 0, 0, 0)


def test_the_evaluators_defaults_are_the_planes() -> None:
    setting = {  # TurnEvaluator's parameter -> the plane's setting it is given
        "conversations": "conversation_cache_size",
        "turns_per_conversation": "conversation_turns", "traces_remembered": "recent_traces",
        "coverage_window_s": "coverage_window_s",
    }  # fmt: skip
    parameters = inspect.signature(TurnEvaluator).parameters
    assert set(parameters) == {"policy", "policy_name", *setting}
    assert {p: parameters[p].default for p in setting} == {
        p: getattr(DEFAULTS, s) for p, s in setting.items()
    }
