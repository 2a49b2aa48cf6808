"""pathgrade: the command line, the embedded stack, the browser view and the demo agent.

Installed as one namespace: the layers `schemas`, `content`, `transport`, `collector`,
`detectors`, `realtime_plane` and `batch_plane` keep their top-level folders and install as
`pathgrade.<layer>` (pyproject's package-dir mapping). Inside this folder, rooms import
downwards only: `cli` -> `stack` -> `web`; `demo` imports none of them (the rules, as data:
`pathgrade.cli.layout`).
"""
