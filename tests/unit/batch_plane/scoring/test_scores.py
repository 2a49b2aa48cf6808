"""Score ids, the scores table, the GenAI evaluation event, and trace scoring from the store."""

from __future__ import annotations

import json
import uuid

from pathgrade.batch_plane.scoring.hallucination import claimed_action_findings, judge_inputs
from pathgrade.batch_plane.scoring.judge import Judge, JudgeBudget
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.scores import Score, evaluation_event, score_id, write_scores
from pathgrade.batch_plane.scoring.trace_scorers import TraceScorer, score_run
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.trace_rows import load_trace
from pathgrade.schemas.model import EvalContext, GenAIFields, Span, Trace

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.openai_standin import OpenAIStandIn


def agent_trace(trace_id: str, run_id: str, answer: str, tool: str = "cancel_order") -> Trace:
    root = Span(
        tenant="t1", trace_id=trace_id, span_id="a" * 16, parent_span_id="",
        name="invoke_agent support", kind="Internal", start_ns=1_700_000_000_000_000_000,
        end_ns=1_700_000_001_000_000_000, attributes={"intent": "cancel"},
        genai=GenAIFields(
            operation="invoke_agent", agent_name="support",
            input_messages=json.dumps([{"role": "user", "content": "cancel order 7"}]),
            output_messages=json.dumps([{"role": "assistant", "content": answer}]),
        ),
        eval=EvalContext(run_id=run_id, dataset_item_id="item-1"),
    )  # fmt: skip
    tool_span = Span(
        tenant="t1", trace_id=trace_id, span_id="b" * 16, parent_span_id="a" * 16,
        name=f"execute_tool {tool}", kind="Internal", start_ns=1_700_000_000_100_000_000,
        end_ns=1_700_000_000_200_000_000,
        genai=GenAIFields(
            operation="execute_tool", tool_name=tool, tool_arguments='{"order": 7}',
            tool_result='{"status": "cancelled"}',
        ),
    )  # fmt: skip
    return Trace("t1", trace_id, [root, tool_span])


def test_score_id_is_deterministic_over_identifying_fields() -> None:
    a = Score("m", "s", "1", "t1", "trace", value=1.0)
    assert a.score_id == Score("m", "s", "1", "t1", "trace", value=0.0, label="x").score_id
    assert a.score_id != Score("m", "s", "1", "t1", "trace", repeat=1).score_id
    assert a.score_id == score_id("s", "1", "trace", "", "", "", 0)


def test_evaluation_event_has_the_genai_shape() -> None:
    score = Score("faithfulness", "judge:f", "faithfulness@1", "t", "tr", value=0.5,
                  label="fail", explanation="why", span_id="sp")  # fmt: skip
    assert evaluation_event(score) == {
        "name": "gen_ai.evaluation.result",
        "trace_id": "tr",
        "span_id": "sp",
        "attributes": {
            "gen_ai.evaluation.name": "faithfulness",
            "gen_ai.evaluation.score.value": 0.5,
            "gen_ai.evaluation.score.label": "fail",
            "gen_ai.evaluation.explanation": "why",
        },
    }
    bare = evaluation_event(Score("m", "s", "1", "t", "tr"))
    assert bare["attributes"] == {"gen_ai.evaluation.name": "m"}


def test_write_scores_is_idempotent(store: ClientStore) -> None:
    trace_id = uuid.uuid4().hex
    score = Score("m", "s", "1", "t1", trace_id, value=0.25, slices={"intent": "x"})
    write_scores(store, [score])
    write_scores(store, [score])
    rows = store.query(
        "SELECT Value, Slices FROM scores FINAL WHERE TraceId = {t:String}", {"t": trace_id}
    ).rows
    assert rows == [[0.25, {"intent": "x"}]]


def test_trace_round_trips_through_the_spans_table(store: ClientStore) -> None:
    trace = agent_trace(uuid.uuid4().hex, "r", "I have cancelled your order.")
    store.insert("spans", span_rows(trace.spans), list(SPAN_COLUMNS))
    loaded = load_trace(store, "t1", trace.trace_id)
    assert loaded is not None
    assert [s.span_id for s in loaded.spans] == [s.span_id for s in trace.spans]
    assert loaded.spans[1].genai == trace.spans[1].genai
    assert loaded.root is not None and loaded.root.eval == trace.root.eval  # type: ignore[union-attr]
    assert loaded.spans[0].end_ns == trace.spans[0].end_ns
    assert load_trace(store, "t1", "0" * 32) is None


def test_claimed_actions_reuses_pg116() -> None:
    ok = agent_trace("1" * 32, "r", "I have cancelled your order.")
    lie = agent_trace("2" * 32, "r", "I have cancelled your order.", tool="lookup_order")
    assert claimed_action_findings(ok) == []
    assert [f.code for f in claimed_action_findings(lie)] == ["PG116"]
    inputs = judge_inputs(ok)
    assert inputs["question"] == "cancel order 7"
    assert inputs["tool_results"] == [{"tool": "cancel_order", "result": '{"status": "cancelled"}'}]


def test_score_run_scores_every_trace_and_stops_at_the_budget(store: ClientStore) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    traces = [
        agent_trace(uuid.uuid4().hex, run_id, f"I have cancelled order {i}.") for i in range(3)
    ]
    store.insert("spans", span_rows([s for t in traces for s in t.spans]), list(SPAN_COLUMNS))
    with OpenAIStandIn() as server:
        judge = Judge(JudgeEndpoint(server.url, f"m-{run_id}"), store=store,
                      budget=JudgeBudget(max_calls=2))  # fmt: skip
        scorer = TraceScorer(("claimed_actions", "task_completion"), judge, slices=("intent",))
        outcome = score_run(store, run_id, scorer, workers=1)
    assert (outcome.traces, outcome.scored) == (3, 2)
    assert "2 of 2 calls" in outcome.stopped
    assert outcome.summary().startswith("scored 2 of 3 traces (4 scores); stopped")
    rows = store.query(
        "SELECT Metric, Value, Label, RunId, DatasetItemId, Slices['intent'] FROM scores FINAL "
        "WHERE RunId = {r:String} ORDER BY Metric, TraceId",
        {"r": run_id},
    ).rows
    assert [r[0] for r in rows] == ["claimed_actions"] * 2 + ["task_completion"] * 2
    assert all(r[4] == "item-1" and r[5] == "cancel" for r in rows)
    assert [r[1:3] for r in rows[:2]] == [[1.0, "pass"]] * 2
    # The stand-in's script passes its first prompt (score 4 of 1-4) and fails its second
    # (1 of 1-4): each stored judged score is its verdict, normalised and labelled.
    verdicts = sorted(v["score"] for v in server.scripted.verdicts("task_completion"))
    assert verdicts == [1, 4]
    assert sorted(tuple(r[1:3]) for r in rows[2:]) == [(0.0, "fail"), (1.0, "pass")]
