-- Per-case checks and end-state oracles: a dataset item declares the catalogue's checks
-- that apply to it (JSON list of {"check": NAME, ...params}) and what the sandbox must hold
-- after an attempt (JSON object of dotted path -> value); '' for none
-- (batch_plane/evaluation/datasets.py). A regression check stored in RegressionCheck
-- (0007) is read as checks.
ALTER TABLE dataset_items ADD COLUMN IF NOT EXISTS Checks String DEFAULT '';
ALTER TABLE dataset_items ADD COLUMN IF NOT EXISTS EndState String DEFAULT '';

-- Gate rows say where each limit came from (the suite, or its risk tier's default) and how
-- many candidate attempts the metric could not decide (counted apart, a failure).
ALTER TABLE gate_rows ADD COLUMN IF NOT EXISTS ThresholdFrom String DEFAULT '';
ALTER TABLE gate_rows ADD COLUMN IF NOT EXISTS MaxRegressionFrom String DEFAULT '';
ALTER TABLE gate_rows ADD COLUMN IF NOT EXISTS Undecided UInt32 DEFAULT 0;
