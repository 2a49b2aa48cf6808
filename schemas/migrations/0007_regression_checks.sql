-- Regression checks: a dataset item made from a failure carries its lesson as a check
-- (the detector codes that fired must not fire again, the offending calls are forbidden),
-- as JSON text; '' for an item without one (batch_plane/evaluation/datasets.py).
ALTER TABLE dataset_items ADD COLUMN IF NOT EXISTS RegressionCheck String DEFAULT '';
