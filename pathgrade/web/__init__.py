"""The browser view, the store owner's loopback endpoint and its client, and metrics
exposition over HTTP.

May import every layer; never `cli` or `stack`.
"""
