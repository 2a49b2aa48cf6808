-- The tool of the span an alert is pinned to (its GenAIToolName; '' for a span that calls
-- none, a monitor's alert or a turn's top span), carried by the alert itself (schemas/
-- alerts.py `tool`: the realtime plane has the span when it raises the alert), so the alerts
-- page counts its top tools in its one read of `alerts` (batch_plane/store/alerts.py
-- tallies) instead of looking every pinned span up in `tool_spans` over the range.
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS Tool LowCardinality(String) DEFAULT '';

-- The alerts stored before, pinned to a tool's span, get its tool from `tool_spans` (the
-- span's latest row) once: written again with it and the same version (DetectedAtNs), so
-- the later row is the one FINAL and the merges keep. Every other column is copied as
-- stored (StoredAt too: an exporter does not send them again).
INSERT INTO alerts
SELECT stored.* REPLACE (tools.GenAIToolName AS Tool)
FROM (SELECT * FROM alerts FINAL WHERE SpanId != '' AND Tool = '') AS stored
INNER JOIN (
    SELECT Tenant, TraceId, SpanId, argMax(GenAIToolName, ReceivedAt) AS GenAIToolName
    FROM tool_spans
    WHERE (Tenant, TraceId, SpanId) IN (SELECT Tenant, TraceId, SpanId FROM alerts WHERE SpanId != '')
    GROUP BY Tenant, TraceId, SpanId
) AS tools
ON stored.Tenant = tools.Tenant AND stored.TraceId = tools.TraceId AND stored.SpanId = tools.SpanId;
