"""Data files the detectors read: the versioned price table and the prose of the generated
catalogue (docs/detectors.md). No code; nothing to import."""
