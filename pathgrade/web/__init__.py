"""The browser UI (`app`: Starlette pages over the store, Jinja2 templates, server-drawn
SVG, served by uvicorn from `server`), the store owner's loopback endpoint and its client,
and metrics exposition over HTTP.

May import every layer; never `cli` or `stack`.
"""
