"""One module per framework: how the app builds its agent on the scripted model and turns
on the framework's own telemetry (or the OpenInference / OpenLLMetry instrumentor for it).
Each runs as `python -m tests.integration.frameworks.adapters.<name>` in the framework's
environment (environments.py)."""
