"""The layers of an agent a metric grades, in the order reports show them.

Each pathgrade metric declares one (a detector on its rule, a per-case check on its
check, a judge metric in its rubric, the offline metrics in `batch_plane.scoring.layers`);
a metric that declares none (efficiency, a custom metric) is shown under `OTHER`.
"""

from __future__ import annotations

from typing import Literal, get_args

Layer = Literal["retrieval", "plan", "tool use", "hand-off", "answer", "safety"]
LAYERS: tuple[Layer, ...] = get_args(Layer)
"""Every layer, in report order."""
OTHER = "other"
"""The group of metrics that declare no layer, shown after the layers."""
