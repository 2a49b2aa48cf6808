"""Reference libraries run in venvs of their own (DeepEval), compared with pathgrade's
metrics on the same inputs."""
