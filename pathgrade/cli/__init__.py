"""The `pathgrade` command line: one module per command group, shared argument helpers in
`support`. May import every layer and `stack`, `web`, `demo`; nothing imports it (the
rules, as data: `pathgrade.cli.layout`).
"""
