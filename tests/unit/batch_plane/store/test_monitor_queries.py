"""The monitors' typed queries on a real chDB store: sums of rollups per scope over a range
of buckets (rows of one key added up by the table), examples with the worst values first,
the episodes of stored monitor alerts and the ticks' round trip."""

from __future__ import annotations

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.schemas.alerts import ALERT_COLUMNS, SEQ_COLUMNS, Alert
from pathgrade.schemas.monitors import BucketCount, MonitorTick, RollupSelection
from pathgrade.schemas.rollups import ROLLUP_COLUMNS, RollupKey

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

T0 = 1_800_000_000  # a bucket start, Unix seconds


def rollup(name: str, bucket: int, count: int, *, slice_: str = "", service: str = "billing",
           source: str = "turns", value: float = 0.0, tenant: str = "acme",
           examples: tuple[str, ...] = ()) -> list:  # fmt: skip
    key = RollupKey(tenant, source, name, service, "agent-1", slice_, bucket, value)  # type: ignore[arg-type]
    return key.row(count, list(examples))


def test_counts_sum_per_tenant_scope_counter_and_bucket_within_the_range(
    store: ClientStore,
) -> None:
    rows = [
        rollup("turns", T0, 10), rollup("turns", T0, 5),  # one key twice: summed
        rollup("tool_error", T0, 2), rollup("turns", T0 + 60, 7),
        rollup("turns", T0 + 120, 100),  # past the range
        rollup("turns", T0, 4, service="search"), rollup("turns", T0, 3, tenant="other"),
        rollup("turns", T0, 6, slice_="app.intent=refund"),
        rollup("finding:PG101", T0, 9),  # a counter not selected
    ]  # fmt: skip
    store.insert("monitor_rollups", rows, list(ROLLUP_COLUMNS))
    queries = MonitorQueries(store)
    everything = RollupSelection("turns", ("turns", "tool_error"))
    found = queries.bucket_counts(everything, T0, T0 + 120)
    assert sorted(found, key=repr) == sorted([
        BucketCount("acme", "", "turns", T0, 0.0, 19),  # both services
        BucketCount("acme", "", "tool_error", T0, 0.0, 2),
        BucketCount("acme", "", "turns", T0 + 60, 0.0, 7),
        BucketCount("other", "", "turns", T0, 0.0, 3),
    ], key=repr)  # fmt: skip
    by_service = RollupSelection("turns", ("turns",), split="service")
    split = queries.bucket_counts(by_service, T0, T0 + 60)
    assert {(c.tenant, c.scope, c.count) for c in split} == {
        ("acme", "service=billing", 15), ("acme", "service=search", 4),
        ("other", "service=billing", 3),
    }  # fmt: skip
    billing_intents = RollupSelection("turns", ("turns",), service="billing", split="app.intent")
    assert queries.bucket_counts(billing_intents, T0, T0 + 60) == [
        BucketCount("acme", "app.intent=refund", "turns", T0, 0.0, 6)
    ]


def test_examples_come_worst_value_first_once_each(store: ClientStore) -> None:
    rows = [
        rollup("faithfulness", T0, 1, source="scores", value=0.9, examples=("t1/s1",)),
        rollup("faithfulness", T0, 1, source="scores", value=0.2, examples=("t2/s2",)),
        rollup("faithfulness", T0 + 60, 1, source="scores", value=0.2, examples=("t3/s3",)),
        rollup("faithfulness", T0, 1, source="scores", value=0.5, examples=("t2/s2",)),
    ]
    store.insert("monitor_rollups", rows, list(ROLLUP_COLUMNS))
    selection = RollupSelection("scores", ("faithfulness",))
    queries = MonitorQueries(store)
    assert queries.examples(selection, "acme", "", T0, T0 + 120, 3) == [
        ("t3", "s3"),
        ("t2", "s2"),
        ("t1", "s1"),
    ]
    assert queries.examples(selection, "acme", "", T0, T0 + 120, 1) == [("t3", "s3")]
    assert queries.examples(selection, "acme", "nope", T0, T0 + 120, 3) == []


def monitor_alert(key: str, state: str, detected: int, scope: str = "") -> list:
    alert = Alert(
        alert_key=key, code="PG200", name="tool-errors", severity="high", kind="monitor",
        reason=state, trace_id="", span_id="", tenant="acme", service="", agent="",
        conversation_id="", risk_tier="", policy="p.yaml", trace_start_ns=0, trace_end_ns=0,
        detected_at_ns=detected,
        details={"scope": scope, "state": state, "episode": "ep-" + scope, "opened_ns": 5},
    )  # fmt: skip
    return [*alert.row(), -2, detected]


def test_the_latest_monitor_alert_of_each_scope_is_its_episode(store: ClientStore) -> None:
    rows = [
        monitor_alert("k1", "firing", 10), monitor_alert("k2", "resolved", 20),
        monitor_alert("k3", "firing", 30, scope="service=search"),
    ]  # fmt: skip
    store.insert("alerts", rows, [*ALERT_COLUMNS, *SEQ_COLUMNS])
    episodes = {(e.scope, e.state, e.episode, e.opened_ns, e.alert_key)
                for e in MonitorQueries(store).episodes()}  # fmt: skip
    assert episodes == {
        ("", "resolved", "ep-", 5, "k2"),
        ("service=search", "firing", "ep-service=search", 5, "k3"),
    }


def test_ticks_round_trip_and_the_latest_per_scope_is_read(store: ClientStore) -> None:
    def tick(at_s: int, scope: str, figure: float | None, state: str) -> MonitorTick:
        at = (T0 + at_s) * 10**9
        return MonitorTick(
            tenant="acme", monitor="faith", kind="score", scope=scope, service="", agent="",
            tick_ns=at, window_start_ns=at - 10**10, window_end_ns=at, figure=figure,
            threshold=-0.05, low=None if figure is None else figure - 0.02,
            high=None if figure is None else figure + 0.02, current=0.7, baseline=0.8,
            items=40, baseline_items=50, state=state, episode="e" if state == "firing" else "",
            details={"examples": [["t", "s"]]},
        )  # type: ignore[arg-type]  # fmt: skip

    queries = MonitorQueries(store)
    written = [tick(100, "a=1", -0.1, "firing"), tick(200, "a=1", None, "no_data"),
               tick(150, "a=2", 0.01, "ok")]  # fmt: skip
    queries.write_ticks(written)
    queries.write_ticks([tick(150, "a=2", 0.01, "ok")])  # a tick written twice: one
    start, end = T0 * 10**9, (T0 + 1000) * 10**9
    assert queries.ticks(start, end, "faith") == sorted(written, key=lambda t: t.tick_ns)
    assert queries.ticks(start + 120 * 10**9, end, "faith") == [written[2], written[1]]
    latest = {(t.scope, t.tick_ns - start) for t in queries.latest_ticks(start)}
    assert latest == {("a=1", 200 * 10**9), ("a=2", 150 * 10**9)}
    assert queries.latest_ticks(start, monitor="other") == []
    assert [t.tick_ns - start for t in queries.latest_ticks(start + 160 * 10**9)] == [200 * 10**9]
