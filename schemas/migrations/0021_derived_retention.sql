-- The rows the views copy from `spans` into the trace list's tables (trace_roots of 0009,
-- trace_facets of 0018) are kept as long as the span rows (0010: 90 days from when the
-- collector received each span), so the list does not show traces whose spans are gone.
-- `pathgrade migrate --retention-days N` sets these with the spans'
-- (schemas.migrations.SPAN_DERIVED_TTL). Not span_counts: per-minute sums without a
-- receipt time.
ALTER TABLE trace_roots MODIFY TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

ALTER TABLE trace_facets MODIFY TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;
