"""A headless Chromium (Debian's /usr/bin/chromium driven by playwright), one per test module."""

from __future__ import annotations

from typing import Any


def open_collecting_errors(browser: Any, url: str) -> tuple[Any, list[str]]:
    """A new page at `url` and the list its console errors and page errors go into."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.goto(url)
    return page, errors
