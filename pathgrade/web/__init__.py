"""The browser UI (`app`: Starlette pages over the store, Jinja2 templates, server-drawn
SVG, served by uvicorn from `server`), its scrape of the boxes' `/metrics`, and the
metrics' names the stack's exporter shares with it (`metric_names`).

May import every layer; never `cli` or `stack`.
"""
