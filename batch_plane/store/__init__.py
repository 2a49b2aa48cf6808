"""The store: the ClickHouse client path (chDB or a server), the store writer that turns
`pathgrade.spans` into rows, and the readers of span and trace rows.

Imports `schemas`, `content` and `transport` only (the bottom room of the batch plane).
"""
