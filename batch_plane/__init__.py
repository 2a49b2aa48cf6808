"""Store writer, scorers, determinism metrics, datasets, replay and the release gate."""
