"""The review queue: traces routed to a person, their labels as human scores, and the
labelled traces as a judge calibration set.

A trace is routed to review when its user gave negative feedback (`pathgrade.feedback` on
any of its spans: "negative", "thumbs_down", "bad" or a number below 0, as the realtime
sampler reads it) or when the realtime plane flagged it with an alert (a detector's
violation: the sampler samples every such trace by default). It leaves the queue once a
reviewer labels it (for the metric asked about, or for any metric).

A label is one row of `scores`: scorer `human` (version `review@1`), the metric, the value
normalised onto [0, 1] with label pass/fail by the metric's rubric, the reviewer's note as
the explanation, linked to the trace, a span (the root unless another is named) and, for
offline runs, the dataset item and run. Labelling the same trace, span and metric again
replaces the earlier label. The labels of a metric export as the JSONL that
`pathgrade judge calibrate --labels` reads (`calibration.load_labels`): item id = trace id,
input = the rubric's inputs read from the trace as the judge reads them, label pass/fail.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pathgrade.batch_plane.scoring.calibration import HumanLabel
from pathgrade.batch_plane.scoring.hallucination import judge_inputs
from pathgrade.batch_plane.scoring.rubrics import Rubric, load_rubric
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.scoring.trace_scorers import JUDGE_METRICS
from pathgrade.batch_plane.store import review as review_reads
from pathgrade.batch_plane.store import traces as stored_traces
from pathgrade.batch_plane.store.review import HUMAN_SCORER
from pathgrade.batch_plane.store.tenancy import EVERY_TENANT
from pathgrade.batch_plane.store.trace_rows import load_trace
from pathgrade.schemas.model import Trace
from pathgrade.schemas.store import ReadableStore, Store

HUMAN_SCORER_VERSION = "review@1"
REVIEW_METRICS = JUDGE_METRICS
"""Metrics a reviewer labels: those a judge grades from a trace alone (so the labels
calibrate that judge)."""
NEGATIVE_FEEDBACK_REASON = "negative feedback"


class ReviewError(ValueError):
    """A label or export that cannot be made; the message names the field and why."""


@dataclass(frozen=True)
class ReviewItem:
    """One trace waiting for review: when it started, why it was routed (negative
    feedback and/or the detector codes that alerted on it)."""

    tenant: str
    trace_id: str
    started_at_ns: int
    service: str
    reasons: tuple[str, ...]

    @property
    def started_at(self) -> str:
        """The start as an ISO UTC timestamp (to the second)."""
        moment = datetime.datetime.fromtimestamp(self.started_at_ns / 1e9, datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def review_queue(
    store: ReadableStore,
    metric: str | None = None,
    limit: int = 100,
    tenant: str | None = None,
    after: tuple[int, str] | None = None,
) -> list[ReviewItem]:
    """One page of the review queue (`review_reads.queue_query`), oldest first."""
    return [
        ReviewItem(
            tenant=row_tenant,
            trace_id=trace_id,
            started_at_ns=int(started),
            service=service,
            reasons=((NEGATIVE_FEEDBACK_REASON,) if negative else ()) + tuple(codes),
        )
        for row_tenant, trace_id, started, service, negative, codes in review_reads.queue(
            store, metric, limit, tenant, after
        )
    ]


def review_rubric(metric: str) -> Rubric:
    """The newest rubric of a metric a reviewer may label."""
    if metric not in REVIEW_METRICS:
        raise ReviewError(
            f"--metric: {metric!r} is not a judge metric of a trace; one of "
            f"{', '.join(REVIEW_METRICS)}"
        )
    return load_rubric(metric)


def parse_value(text: str, rubric: Rubric) -> tuple[float, str]:
    """(value on [0, 1], pass/fail) of a reviewer's `--value`: `pass`, `fail` or a score
    on the rubric's scale."""
    if text in ("pass", "fail"):
        return (1.0 if text == "pass" else 0.0), text
    scale = rubric.scale
    try:
        score = float(text)
    except ValueError:
        raise ReviewError(
            f"--value: expected pass, fail or a score {scale.min}..{scale.max}, got {text!r}"
        ) from None
    if not scale.min <= score <= scale.max:
        raise ReviewError(
            f"--value: {text} is outside the {rubric.ref} scale {scale.min}..{scale.max}"
        )
    return scale.normalise(score), "pass" if score >= scale.pass_at else "fail"


def human_score(
    trace: Trace, metric: str, value: str, note: str = "", span_id: str | None = None
) -> Score:
    """A reviewer's label of `trace` as a human score of `metric`, linked to `span_id`
    (default: the root span) and to the trace's dataset item and run."""
    rubric = review_rubric(metric)
    normalised, label = parse_value(value, rubric)
    root = trace.root
    if span_id is None:
        span_id = root.span_id if root else trace.spans[0].span_id
    elif span_id not in {span.span_id for span in trace.spans}:
        raise ReviewError(f"--span: trace {trace.trace_id} has no span {span_id!r}")
    return Score(
        metric, HUMAN_SCORER, HUMAN_SCORER_VERSION, tenant=trace.tenant,
        trace_id=trace.trace_id, value=normalised, label=label, explanation=note,
        span_id=span_id, rubric_version=rubric.ref,
        dataset_item_id=root.eval.dataset_item_id if root else "",
        run_id=root.eval.run_id if root else "",
        repeat=(root.eval.replay_index or 0) if root else 0,
    )  # fmt: skip


def trace_tenant(store: Store, trace_id: str, tenant: str | None = None) -> str:
    """The tenant whose stored trace `trace_id` is: `tenant` if it has it, else the only
    one that has it (ReviewError when none has, or when several have and none is named)."""
    tenants = stored_traces.tenants_of(store, EVERY_TENANT, trace_id)
    if tenant is not None:
        if tenant not in tenants:
            raise ReviewError(f"TRACE: tenant {tenant!r} has no stored span of {trace_id}")
        return tenant
    if not tenants:
        raise ReviewError(f"TRACE: no stored span of trace {trace_id}")
    if len(tenants) > 1:
        raise ReviewError(
            f"TRACE: {trace_id} is stored for tenants {', '.join(tenants)}: name one with --tenant"
        )
    return tenants[0]


def record_label(
    store: Store,
    trace_id: str,
    metric: str,
    value: str,
    note: str = "",
    span_id: str | None = None,
    tenant: str | None = None,
) -> Score:
    """Write a reviewer's label of a stored trace (`human_score`); returns it."""
    review_rubric(metric)  # a bad metric fails before any lookup
    owner = trace_tenant(store, trace_id, tenant)
    trace = load_trace(store, owner, trace_id)
    if trace is None:
        raise ReviewError(f"TRACE: no stored span of trace {trace_id}")
    score = human_score(trace, metric, value, note, span_id)
    write_scores(store, [score])
    return score


def calibration_set(
    store: Store, metric: str, since_ns: int | None = None, tenant: str | None = None
) -> list[HumanLabel]:
    """The labelled traces of `metric` (labelled since `since_ns`; the latest label of
    each trace) as calibration items for the metric's rubric, in label order; a trace
    whose spans are gone is left out."""
    rubric = review_rubric(metric)
    rows = review_reads.labelled(store, metric, since_ns, tenant)
    shared = {t for t, n in Counter(trace for _, trace, _ in rows).items() if n > 1}
    labels = []
    for row_tenant, trace_id, label in rows:
        trace = load_trace(store, row_tenant, trace_id)
        if trace is None:
            continue
        inputs = judge_inputs(trace)
        labels.append(
            HumanLabel(
                item_id=f"{row_tenant}/{trace_id}" if trace_id in shared else trace_id,
                input={name: inputs[name] for name in rubric.inputs},
                label=label,
            )
        )
    return labels


def dump_labels(labels: Sequence[HumanLabel]) -> str:
    """Labels as JSONL, one item a line (the format `load_labels` reads)."""
    return "".join(json.dumps(label.model_dump(), ensure_ascii=False) + "\n" for label in labels)
