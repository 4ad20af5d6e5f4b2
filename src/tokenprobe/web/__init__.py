"""The local web app (U4): calculator, what-if panel and run browser over a JSON API.

app.py      FastAPI routes and error handling (every error is a 4xx/5xx JSON message)
schemas.py  strict request models with bounds; catalog-only model and GPU names
runs.py     the run browser, confined to the runs folder
page.py     the single page (vanilla JS; plotly.js served from the Python package)
"""

from __future__ import annotations

from tokenprobe.web.app import create_app, serve

__all__ = ["create_app", "serve"]
