-- Monitors (docs/monitors.md): alerts over windows of live traffic, evaluated from rollups
-- instead of scans of the turns.
-- monitor_rollups (schemas/rollups.py): per bucket of turn end time, tenant, service, agent
-- and slice ('' for all turns, 'name=value' for a value of a slice the policy keeps), the
-- realtime plane's counts of turns (Source 'turns': every turn under 'turns', the turns that
-- were not good under their counter) and the online scorer's counts of score values (Source
-- 'scores', Name the metric, Value rounded to 3 decimals). SummingMergeTree: rows of one key
-- add up; Examples (a few 'trace id/span id' of the counted turns) is one merged row's.
-- A turn evaluated again after a crash (its offsets not yet committed) counts twice: at
-- most the turns of one commit interval (1 s).
CREATE TABLE IF NOT EXISTS monitor_rollups
(
    Tenant LowCardinality(String),
    Source LowCardinality(String),
    Name LowCardinality(String),
    Service LowCardinality(String),
    Agent LowCardinality(String),
    Slice String,
    BucketStart DateTime('UTC'),
    Value Float64,
    Count UInt64,
    Examples Array(String)
)
ENGINE = SummingMergeTree(Count)
PARTITION BY toYYYYMM(BucketStart)
ORDER BY (Tenant, Source, Name, BucketStart, Service, Agent, Slice, Value)
TTL BucketStart + INTERVAL 90 DAY;

-- monitor_ticks: what each evaluation of a monitor found, per tenant and scope (a value of
-- its slice, '' for all): the figure against its threshold, the bootstrap interval and the
-- baseline where it has them, the state (ok, firing, no_data) and the episode. The alerts
-- page and `pathgrade monitors` draw and print the series from it. Monitor alerts are rows
-- of `alerts` (Kind 'monitor', SpansPartition -2: the monitors' own numbering for the
-- webhook's delivery); the latest per monitor and scope is its episode's state.
CREATE TABLE IF NOT EXISTS monitor_ticks
(
    Tenant LowCardinality(String),
    Monitor LowCardinality(String),
    Kind LowCardinality(String),
    Scope String,
    Service LowCardinality(String),
    Agent LowCardinality(String),
    TickNs Int64,
    WindowStartNs Int64,
    WindowEndNs Int64,
    Figure Nullable(Float64),
    Threshold Float64,
    Low Nullable(Float64),
    High Nullable(Float64),
    Current Nullable(Float64),
    Baseline Nullable(Float64),
    Items UInt64,
    BaselineItems UInt64,
    State LowCardinality(String),
    Episode String,
    Details String
)
ENGINE = ReplacingMergeTree(TickNs)
PARTITION BY toYYYYMM(fromUnixTimestamp64Nano(TickNs))
ORDER BY (Tenant, Monitor, Scope, TickNs)
TTL toDateTime(fromUnixTimestamp64Nano(TickNs)) + INTERVAL 90 DAY;
