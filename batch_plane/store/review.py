"""Typed reads of the review queue (`scoring.review`): the routed traces without a human
label (spans with negative feedback and traces with a violation, less the labelled ones),
and the human labels of a metric."""

from __future__ import annotations

from typing import Any

from pathgrade.schemas.genai import NEGATIVE_FEEDBACK
from pathgrade.schemas.store import ReadableStore

HUMAN_SCORER = "human"
"""The scorer of a reviewer's labels."""


def queue_query(
    metric: str | None = None,
    limit: int = 100,
    tenant: str | None = None,
    after: tuple[int, str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters of the review queue, oldest first: routed traces without a
    human label (for `metric`, else for any metric), of `tenant` if given, after the
    keyset `after` = (started at ns, trace id) of the previous page's last row. The spans
    with feedback are read from `feedback_spans` (migration 0020: each span's `PG_FEEDBACK`
    attribute), without FINAL: a span stored twice (a replay) gives the same minimum start,
    service and feedback, so the grouped rows are exact without merging its copies."""
    negative = ", ".join(f"'{value}'" for value in sorted(NEGATIVE_FEEDBACK))
    tenant_only = " AND Tenant = {tenant:String}" if tenant is not None else ""
    labelled_for = " AND Metric = {metric:String}" if metric is not None else ""
    page = (
        " HAVING (StartedAtNs, TraceId) > ({after_ns:Int64}, {after_trace:String})"
        if after is not None
        else ""
    )
    sql = (
        "SELECT Tenant, TraceId, min(StartNs) AS StartedAtNs, any(Service) AS Service, "
        "max(Negative) AS NegativeFeedback, arraySort(groupUniqArrayArray(Codes)) AS Codes "
        "FROM ("
        "SELECT Tenant, TraceId, toInt64(toUnixTimestamp64Nano(min(Timestamp))) AS StartNs, "
        "any(ServiceName) AS Service, 1 AS Negative, CAST([], 'Array(String)') AS Codes "
        f"FROM feedback_spans WHERE (lower(Feedback) IN ({negative}) "
        "OR toFloat64OrNull(Feedback) < 0)"
        f"{tenant_only} GROUP BY Tenant, TraceId "
        "UNION ALL "
        "SELECT Tenant, TraceId, min(TraceStartNs) AS StartNs, any(Service) AS Service, "
        "0 AS Negative, groupUniqArray(Code) AS Codes "
        f"FROM alerts FINAL WHERE Kind = 'violation'{tenant_only} GROUP BY Tenant, TraceId"
        ") WHERE (Tenant, TraceId) NOT IN ("
        "SELECT Tenant, TraceId FROM scores FINAL "
        f"WHERE Scorer = '{HUMAN_SCORER}'{labelled_for}{tenant_only}) "
        f"GROUP BY Tenant, TraceId{page} ORDER BY StartedAtNs, TraceId LIMIT {{limit:UInt32}}"
    )
    parameters: dict[str, Any] = {"limit": limit}
    if tenant is not None:
        parameters["tenant"] = tenant
    if metric is not None:
        parameters["metric"] = metric
    if after is not None:
        parameters["after_ns"], parameters["after_trace"] = after
    return sql, parameters


def queue(
    store: ReadableStore,
    metric: str | None = None,
    limit: int = 100,
    tenant: str | None = None,
    after: tuple[int, str] | None = None,
) -> list[tuple[str, str, int, str, int, list[str]]]:
    """One page of the review queue (`queue_query`): (tenant, trace id, started at ns,
    service, negative feedback 0/1, alerted codes) of each routed trace, oldest first."""
    sql, parameters = queue_query(metric, limit, tenant, after)
    rows = store.query(sql, parameters, readonly=True).rows
    return [(t, trace, started, service, negative, codes)
            for t, trace, started, service, negative, codes in rows]  # fmt: skip


def labelled(
    store: ReadableStore, metric: str, since_ns: int | None = None, tenant: str | None = None
) -> list[tuple[str, str, str]]:
    """(tenant, trace id, latest label) of each trace labelled for `metric` with a value
    (labelled since `since_ns`; of `tenant` if given), in label order."""
    where = "Scorer = {scorer:String} AND Metric = {metric:String} AND Value IS NOT NULL"
    parameters: dict[str, Any] = {"scorer": HUMAN_SCORER, "metric": metric}
    if since_ns is not None:
        where += " AND CreatedAt >= fromUnixTimestamp64Nano({since:Int64})"
        parameters["since"] = since_ns
    if tenant is not None:
        where += " AND Tenant = {tenant:String}"
        parameters["tenant"] = tenant
    rows = store.query(
        "SELECT Tenant, TraceId, argMax(Label, CreatedAt) AS Label FROM scores FINAL "
        f"WHERE {where} GROUP BY Tenant, TraceId ORDER BY max(CreatedAt), TraceId",
        parameters,
        readonly=True,
    ).rows
    return [(t, trace, label) for t, trace, label in rows]
