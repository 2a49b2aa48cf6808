-- Tenants of datasets, runs and gates: the browser UI shows a viewer only its tenant's rows
-- (pathgrade/web/viewers.py). Each table gains a Tenant column at the end of its sort key
-- (ClickHouse can only append a new column to a sorting key), so two tenants may use the
-- same dataset name, run id or gate id. The column is added without a default (a sort-key
-- column may not get one in the same ALTER) and given the default right after, so rows
-- written before read as tenant 'default'.
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (Name, Version, Tenant);
ALTER TABLE datasets MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE dataset_items ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (Dataset, Version, ItemId, Tenant);
ALTER TABLE dataset_items MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE runs ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (RunId, Tenant);
ALTER TABLE runs MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE gates ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (GateId, Tenant);
ALTER TABLE gates MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE gate_rows ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (GateId, RowIndex, Tenant);
ALTER TABLE gate_rows MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';
