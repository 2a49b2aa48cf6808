"""Judge client: an OpenAI-compatible chat-completions endpoint grading with a rubric.

Temperature 0, structured JSON output (`response_format` json_schema, or json_object for
endpoints without it) checked against the rubric's schema and parsed with pydantic.
Retries 429, 5xx, timeouts, transport errors and invalid answers with exponential backoff
and full jitter (a `Retry-After` header wins). At most `concurrency` requests are in
flight, whatever the number of calling threads. Each request's token usage and list-price
cost go to `judge_calls`; each verdict is cached in `judge_cache` under
sha256(model, rubric version, canonical inputs), so a re-run makes no request.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.rubrics import Rubric
from pathgrade.batch_plane.store.judges import cached
from pathgrade.detectors.prices import PriceTable, cost_usd, shipped_price_table
from pathgrade.schemas.store import Store
from pydantic import BaseModel, ConfigDict

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class JudgeError(RuntimeError):
    """The judge gave no valid verdict (after retries, or a non-retryable answer)."""


class BudgetExhausted(RuntimeError):
    """The judge budget (calls, tokens or cost) is spent; no further request is made."""


class Verdict(BaseModel):
    """A judge answer: the rubric score and explanation, plus rubric-specific fields."""

    model_config = ConfigDict(extra="allow", frozen=True)

    score: float
    explanation: str


@dataclass(frozen=True)
class Usage:
    """Tokens of one request and their list-price cost (None: model not in the table)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True)
class JudgeResult:
    """A verdict with where it came from: a request (`attempts` >= 1) or the cache."""

    verdict: Verdict
    usage: Usage
    cache_key: str
    cached: bool
    attempts: int = 0


@dataclass
class JudgeBudget:
    """Limits on requests, tokens and USD for one job; None means no limit. Thread-safe."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None
    calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reserve(self) -> None:
        """Count one request, or raise `BudgetExhausted` naming the limit reached."""
        with self._lock:
            reached = self.reached()
            if reached:
                raise BudgetExhausted(f"judge budget reached: {reached}")
            self.calls += 1

    def charge(self, usage: Usage) -> None:
        with self._lock:
            self.tokens += usage.input_tokens + usage.output_tokens
            self.usd += usage.cost_usd or 0.0

    def reached(self) -> str:
        """Which limit is reached ("" when none)."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"{self.calls} of {self.max_calls} calls"
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"{self.tokens} of {self.max_tokens} tokens"
        if self.max_usd is not None and self.usd >= self.max_usd:
            return f"${self.usd:.4f} of ${self.max_usd:.4f}"
        return ""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Sorted-key, compact JSON: the same inputs always give the same text."""
    return _CANONICAL.encode(value)


def cache_key(model: str, rubric_ref: str, inputs: dict[str, Any]) -> str:
    """Hex sha256 of (judge model, rubric version, canonical inputs)."""
    return hashlib.sha256(canonical_json([model, rubric_ref, inputs]).encode()).hexdigest()


class JudgeCache:
    """Verdicts in ClickHouse table `judge_cache`, keyed by `cache_key`."""

    COLUMNS = (
        "CacheKey", "Model", "RubricVersion", "Output", "InputTokens", "OutputTokens",
        "CostUsd", "CreatedAt",
    )  # fmt: skip

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str) -> tuple[Verdict, Usage] | None:
        found = cached(self.store, key)
        if found is None:
            return None
        output, input_tokens, output_tokens, cost = found
        return Verdict.model_validate_json(output), Usage(input_tokens, output_tokens, cost)

    def put(self, key: str, model: str, rubric_ref: str, verdict: Verdict, usage: Usage) -> None:
        row = [
            key, model, rubric_ref, verdict.model_dump_json(), usage.input_tokens,
            usage.output_tokens, usage.cost_usd, now_ms(),
        ]  # fmt: skip
        self.store.insert("judge_cache", [row], list(self.COLUMNS))


JUDGE_CALL_COLUMNS = (
    "CallId", "CacheKey", "Model", "RubricVersion", "InputTokens", "OutputTokens", "CostUsd",
    "LatencyMs", "Attempts", "CreatedAt",
)  # fmt: skip


def now_ms() -> int:
    """Now as DateTime64(3) ticks (ms since the epoch)."""
    return time.time_ns() // 1_000_000


class _Retry(Exception):
    """One failed attempt that may be retried; `wait_s` is the server's Retry-After."""

    def __init__(self, reason: str, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.wait_s = wait_s


class Judge:
    """Grades inputs with a rubric through one endpoint, cache first. Thread-safe."""

    def __init__(
        self,
        endpoint: JudgeEndpoint,
        store: Store | None = None,
        prices: PriceTable | None = None,
        budget: JudgeBudget | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.store = store
        self.cache = JudgeCache(store) if store is not None else None
        self.prices = prices or shipped_price_table()
        self.budget = budget or JudgeBudget()
        self.sleep = sleep
        self.rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(endpoint.concurrency)
        key = os.environ.get(endpoint.api_key_env, "")
        self.http = httpx.Client(
            base_url=endpoint.base_url.rstrip("/"),
            timeout=endpoint.timeout_s,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            limits=httpx.Limits(max_connections=endpoint.concurrency),
        )

    def close(self) -> None:
        self.http.close()

    def evaluate(self, rubric: Rubric, inputs: dict[str, Any], repeat: int = 0) -> JudgeResult:
        """The rubric verdict on `inputs`; repeat k > 0 is a separate (separately cached)
        judgement of the same inputs, for variance. Raises JudgeError, BudgetExhausted."""
        prompt = rubric.render(inputs)
        keyed = {**inputs, "__repeat__": repeat} if repeat else inputs
        key = cache_key(self.endpoint.model, rubric.ref, keyed)
        hit = self.cache.get(key) if self.cache else None
        if hit:
            return JudgeResult(hit[0], hit[1], key, cached=True)
        self.budget.reserve()
        started = time.monotonic()
        with self._slots:
            verdict, usage, attempts = self._request(rubric, prompt, inputs)
        self.budget.charge(usage)
        if self.cache and self.store is not None:
            self.cache.put(key, self.endpoint.model, rubric.ref, verdict, usage)
            latency_ms = (time.monotonic() - started) * 1000
            row = [
                uuid.uuid4().hex, key, self.endpoint.model, rubric.ref, usage.input_tokens,
                usage.output_tokens, usage.cost_usd, latency_ms, attempts, now_ms(),
            ]  # fmt: skip
            self.store.insert("judge_calls", [row], list(JUDGE_CALL_COLUMNS))
        return JudgeResult(verdict, usage, key, cached=False, attempts=attempts)

    def _request(
        self, rubric: Rubric, prompt: str, inputs: dict[str, Any]
    ) -> tuple[Verdict, Usage, int]:
        """POST until a valid verdict or attempts run out."""
        body = self._body(rubric, prompt)
        reasons = []
        for attempt in range(1, self.endpoint.max_attempts + 1):
            try:
                verdict, usage = self._attempt(rubric, body, inputs)
                return verdict, usage, attempt
            except _Retry as retry:
                reasons.append(str(retry))
                if attempt < self.endpoint.max_attempts:
                    self.sleep(self._backoff(attempt, retry.wait_s))
        raise JudgeError(
            f"judge {self.endpoint.model} gave no valid {rubric.ref} verdict after "
            f"{self.endpoint.max_attempts} attempts: {'; '.join(reasons)}"
        )

    def _body(self, rubric: Rubric, prompt: str) -> dict[str, Any]:
        if self.endpoint.response_format == "json_schema":
            response_format: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {"name": rubric.id, "schema": rubric.output_schema, "strict": True},
            }
        else:
            response_format = {"type": "json_object"}
        return {
            "model": self.endpoint.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": prompt}],
            "response_format": response_format,
        }

    def _attempt(
        self, rubric: Rubric, body: dict[str, Any], inputs: dict[str, Any]
    ) -> tuple[Verdict, Usage]:
        try:
            response = self.http.post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise _Retry(f"timeout ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retry(f"transport error: {exc}") from exc
        if response.status_code in RETRY_STATUSES:
            raise _Retry(f"HTTP {response.status_code}", _retry_after(response))
        if response.status_code != 200:
            raise JudgeError(f"judge answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
            usage = payload.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retry(f"malformed response body: {exc!r}") from exc
        return self._verdict(rubric, content, inputs), self._usage(usage)

    def _verdict(self, rubric: Rubric, content: Any, inputs: dict[str, Any]) -> Verdict:
        """The answer checked against the rubric (schema, and one verdict per graded item
        for a verdict-list rubric, whose score is then computed from them)."""
        try:
            output = json.loads(content)
        except (TypeError, ValueError) as exc:
            raise _Retry(f"answer is not JSON: {exc}") from exc
        problems = rubric.check_output(output, inputs)
        if problems:
            raise _Retry(f"answer does not match the {rubric.ref} schema: {'; '.join(problems)}")
        try:
            return Verdict.model_validate({**output, "score": rubric.output_score(output)})
        except ValueError as exc:  # a ValidationError, or no verdict to score
            raise _Retry(f"answer does not validate: {exc}") from exc

    def _usage(self, usage: dict[str, Any]) -> Usage:
        input_tokens = int(usage.get("prompt_tokens") or 0)
        output_tokens = int(usage.get("completion_tokens") or 0)
        cost = cost_usd(
            self.endpoint.model, self.endpoint.provider, input_tokens, output_tokens, self.prices
        )
        return Usage(input_tokens, output_tokens, cost)

    def _backoff(self, attempt: int, retry_after_s: float | None) -> float:
        """Retry-After when the server gave one, else full jitter: U(0, min(cap, base*2^n))."""
        if retry_after_s is not None:
            return min(retry_after_s, self.endpoint.backoff_max_s)
        ceiling = min(
            self.endpoint.backoff_max_s, self.endpoint.backoff_base_s * 2 ** (attempt - 1)
        )
        return self.rng.uniform(0, ceiling)


def _retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (delta-seconds form only), else None."""
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
