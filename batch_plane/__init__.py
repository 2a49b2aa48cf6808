"""The batch plane: what runs over stored traces and datasets, into ClickHouse.

Rooms, lowest first (each imports only the rooms before it, never `evaluation`):
`store` (client path, store writer, span and trace rows) and `agents` (calling the agent
under test); `scoring` (trajectory scorers, judges, rubrics, calibration, the per-trace
scorer set shared online and offline); `edge` (agent graphs, simulation, determinism,
EDGE reports); `evaluation` (datasets, runs, replay, suites, the gate); `export` (results out, from
`store`). `edge` and `evaluation` never import each other. What each room may import is
written in `pathgrade.cli.layout` (docs/layout.md's table).
"""
