"""The embedded stack (`pathgrade up`): its processes, the bundled broker, the store owner,
data-directory ownership, supervision, status and priorities.

May import every layer, `web` (the owner's endpoint) and `demo`; never `cli`.
"""
