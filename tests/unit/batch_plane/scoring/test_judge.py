"""The judge client against the local OpenAI stand-in: retries, cache, budget, usage."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from pathgrade.batch_plane.scoring.judge import (
    BudgetExhausted,
    Judge,
    JudgeBudget,
    JudgeError,
    cache_key,
)
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.store.client import ClientStore

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.openai_standin import NO_CONTENT, OpenAIStandIn, Reply

RUBRIC = load_rubric("faithfulness@1")
INPUTS = {"question": "refund?", "answer": "Refunded $5.", "tool_results": [{"refund": 5}]}


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as server:
        yield server


def make_judge(
    server: OpenAIStandIn, target: object = None, model: str = "gpt-4o-mini", **options: object
) -> tuple[Judge, list[float]]:
    sleeps: list[float] = []
    endpoint = JudgeEndpoint(server.url, model, **options)  # type: ignore[arg-type]
    return Judge(endpoint, store=target, sleep=sleeps.append), sleeps  # type: ignore[arg-type]


def test_request_is_temperature_zero_structured_and_pinned(standin: OpenAIStandIn) -> None:
    judge, _ = make_judge(standin)
    result = judge.evaluate(RUBRIC, INPUTS)
    request = standin.requests[0]
    assert request["temperature"] == 0
    assert request["model"] == "gpt-4o-mini"
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["schema"] == RUBRIC.output_schema
    assert "Refunded $5." in request["messages"][0]["content"]
    assert result.verdict.score == 4 and result.attempts == 1 and not result.cached


def test_usage_and_cost_come_from_the_price_table(standin: OpenAIStandIn) -> None:
    standin.enqueue(Reply(prompt_tokens=1_000_000, completion_tokens=0))
    judge, _ = make_judge(standin)
    usage = judge.evaluate(RUBRIC, INPUTS).usage
    assert usage.input_tokens == 1_000_000
    price = judge.prices.price_of("gpt-4o-mini")
    assert price is not None and usage.cost_usd == pytest.approx(price.input_usd_per_mtok)


def test_429_honours_retry_after_then_succeeds(standin: OpenAIStandIn) -> None:
    standin.enqueue(Reply(status=429, retry_after="7"), Reply(status=500))
    judge, sleeps = make_judge(standin, backoff_base_s=0.25)
    result = judge.evaluate(RUBRIC, INPUTS)
    assert result.attempts == 3
    assert sleeps[0] == 7.0
    assert 0 <= sleeps[1] <= 0.5  # full jitter: U(0, base * 2^1)


def test_timeouts_are_retried(standin: OpenAIStandIn) -> None:
    standin.enqueue(Reply(delay_s=4.0))  # answers long after the first attempt gave up
    judge, sleeps = make_judge(standin, timeout_s=1.0)
    result = judge.evaluate(RUBRIC, INPUTS)
    assert result.attempts >= 2  # more when a loaded machine makes a prompt answer late too
    assert len(sleeps) == result.attempts - 1 and len(standin.requests) == result.attempts


def test_malformed_and_off_schema_answers_are_retried_then_fail(standin: OpenAIStandIn) -> None:
    standin.enqueue(
        Reply(content="{not json"),
        Reply(content={"score": 9, "explanation": "x"}),
        Reply(content={"score": 2}),
    )
    judge, _ = make_judge(standin, max_attempts=3)
    with pytest.raises(JudgeError) as error:
        judge.evaluate(RUBRIC, INPUTS)
    message = str(error.value)
    assert "not JSON" in message
    assert "$.score: 9 is greater than 4" in message
    assert "missing required property 'explanation'" in message


MALFORMED = {
    "not JSON": Reply(content='{"score": '),
    "a score above the scale": Reply(content={"score": 9, "explanation": "x"}),
    "a score below the scale": Reply(content={"score": 0, "explanation": "x"}),
    "a missing field": Reply(content={"score": 2}),
    "a field of the wrong type": Reply(content={"score": "high", "explanation": "x"}),
    "an extra field": Reply(content={"score": 2, "explanation": "x", "confidence": 1}),
    "a JSON list": Reply(content="[3]"),
    "no content": Reply(content=NO_CONTENT),
    "a body that is no JSON": Reply(body="<html>bad gateway</html>"),
    "a completion without choices": Reply(body='{"choices": []}'),
}


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_is_retried_and_the_next_valid_one_taken(
    standin: OpenAIStandIn, reply: Reply
) -> None:
    """docs/scoring.md: malformed bodies and invalid answers are retried; the verdict is
    the first valid answer, never the malformed one."""
    standin.enqueue(reply, Reply(content={"score": 2, "explanation": "partly supported"}))
    judge, sleeps = make_judge(standin)
    result = judge.evaluate(RUBRIC, INPUTS)
    assert (result.verdict.score, result.verdict.explanation) == (2, "partly supported")
    assert result.attempts == 2 and len(sleeps) == 1 and len(standin.requests) == 2


def test_the_stand_ins_default_script_gives_low_and_malformed_answers(
    standin: OpenAIStandIn,
) -> None:
    """Four new prompts: the best verdict, the lowest, not JSON then the best, off the
    scale then the lowest. The judge passes, fails, retries and fails as it should."""
    judge, _ = make_judge(standin)
    results = [judge.evaluate(RUBRIC, {**INPUTS, "question": f"refund {n}?"}) for n in range(4)]
    assert [r.verdict.score for r in results] == [4, 1, 4, 1]
    assert [r.attempts for r in results] == [1, 1, 2, 2]
    assert len(standin.requests) == 6
    assert [v["score"] for v in standin.scripted.verdicts(RUBRIC.id)] == [4, 1, 4, 1]
    again = judge.evaluate(RUBRIC, {**INPUTS, "question": "refund 1?"}, repeat=1)
    assert (again.verdict.score, again.attempts) == (1, 1)  # the same prompt, the same answer


def test_client_errors_are_not_retried(standin: OpenAIStandIn) -> None:
    standin.enqueue(Reply(status=400))
    judge, sleeps = make_judge(standin)
    with pytest.raises(JudgeError, match="HTTP 400"):
        judge.evaluate(RUBRIC, INPUTS)
    assert sleeps == [] and len(standin.requests) == 1


def test_cache_makes_a_rerun_free_and_records_calls(
    standin: OpenAIStandIn, store: ClientStore
) -> None:
    model = f"judge-{uuid.uuid4().hex[:8]}"
    judge, _ = make_judge(standin, target=store, model=model)
    first = judge.evaluate(RUBRIC, INPUTS)
    again = make_judge(standin, target=store, model=model)[0].evaluate(RUBRIC, dict(INPUTS))
    assert len(standin.requests) == 1
    assert again.cached and again.verdict == first.verdict
    assert again.cache_key == cache_key(model, "faithfulness@1", INPUTS)
    calls = store.query(
        "SELECT InputTokens, OutputTokens, Attempts FROM judge_calls WHERE Model = {m:String}",
        {"m": model},
    ).rows
    assert calls == [[120, 30, 1]]
    judge.evaluate(RUBRIC, INPUTS, repeat=1)  # a repeat is a new judgement
    assert len(standin.requests) == 2


def test_budget_stops_before_the_next_call(standin: OpenAIStandIn) -> None:
    judge, _ = make_judge(standin)
    judge.budget = JudgeBudget(max_tokens=200)
    judge.evaluate(RUBRIC, INPUTS)
    judge.evaluate(RUBRIC, INPUTS)
    with pytest.raises(BudgetExhausted, match="300 of 200 tokens"):
        judge.evaluate(RUBRIC, INPUTS)
    assert len(standin.requests) == 2


def test_concurrency_limit_holds_with_more_threads() -> None:
    """The stand-in holds each request until released, so three are in flight at once
    however slowly the threads start; one released request lets exactly one more in."""
    with OpenAIStandIn(held=True) as server:
        judge, _ = make_judge(server, concurrency=3)
        threads = [
            threading.Thread(target=judge.evaluate, args=(RUBRIC, INPUTS)) for _ in range(12)
        ]
        for thread in threads:
            thread.start()
        for answered in range(12):
            assert server.wait_for_in_flight(min(3, 12 - answered)), server.in_flight
            server.release()
        for thread in threads:
            thread.join()
        assert server.max_in_flight == 3
        assert len(server.requests) == 12
