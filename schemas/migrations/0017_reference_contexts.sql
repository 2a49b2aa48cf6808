-- Reference contexts: what a dataset item's retrieval should find, for the deterministic
-- context precision and recall (batch_plane/scoring/retrieval.py): JSON {"texts": [...],
-- "ids": [...]} ('' for none; batch_plane/evaluation/datasets.py). Numbered after the
-- migrations other work in flight takes (0015, 0016).
ALTER TABLE dataset_items ADD COLUMN IF NOT EXISTS ReferenceContexts String DEFAULT '';
