"""Scrape an inference server's Prometheus `/metrics` in a thread, on the run's clock.

Each tick GETs the URL and turns the text into one `records.ServerSample` (`prometheus_text.
server_sample`) at run-relative `t_s = now_s() - t0_s`, taken when the scrape *started*. A scrape
that fails (connection refused, HTTP error, timeout) gives a sample with `error` set and every
figure None, plus one note per start of failure; it never stops the thread. A server that answers
but exports none of the known metrics gets one note ("no known server metrics").

The period is at least `MIN_PERIOD_S`: a scrape makes the server render its whole registry, and a
one-thread llama.cpp server would spend measurable time doing it at 10 Hz.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable

from tokenprobe.errors import ConfigError
from tokenprobe.records import ServerSample
from tokenprobe.telemetry.prometheus_text import server_sample
from tokenprobe.units import now_s

MIN_PERIOD_S = 0.25
MAX_TIMEOUT_S = 2.0


def metrics_url(api_url: str) -> str:
    """The `/metrics` of the server behind an OpenAI API base URL (`.../v1` -> `.../metrics`)."""
    root = api_url.rstrip("/")
    root = root.removesuffix("/v1")
    return root + "/metrics"


class ServerScraper:
    """GET `url` every `period_s` (>= MIN_PERIOD_S) from `start(t0_s)` until `stop()`."""

    def __init__(
        self,
        url: str,
        period_s: float,
        on_sample: Callable[[ServerSample], None] | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError("server_metrics_url", url, "an http(s) URL, e.g. .../metrics")
        if not period_s > 0:
            raise ConfigError("period_s", period_s, "a positive number of seconds")
        self.url = url
        self.period_s = max(period_s, MIN_PERIOD_S)
        self.on_sample = on_sample
        self.samples: list[ServerSample] = []
        self.notes: list[str] = []
        self.failures = 0
        self._failing = False
        self._warned_empty = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scrape_once(self, t_s: float) -> ServerSample:
        """One scrape at run-relative `t_s` (also what the thread does each tick)."""
        timeout_s = min(MAX_TIMEOUT_S, max(self.period_s, 0.5))
        try:
            with urllib.request.urlopen(self.url, timeout=timeout_s) as response:
                text = response.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return self._failed(t_s, f"{type(exc).__name__}: {exc}")
        if self._failing:
            self._failing = False
            self.notes.append(f"server metrics answer again at t={t_s:.3f} s")
        sample = server_sample(text, t_s)
        if sample.source is None and not self._warned_empty:
            self._warned_empty = True
            self.notes.append(f"{self.url} answered but exports no known server metric")
        return sample

    def _failed(self, t_s: float, reason: str) -> ServerSample:
        self.failures += 1
        if not self._failing:
            self._failing = True
            self.notes.append(f"server metrics {self.url} failed at t={t_s:.3f} s: {reason}")
        return ServerSample(t_s=t_s, error=reason)

    def start(self, t0_s: float) -> ServerScraper:
        self._thread = threading.Thread(
            target=self._loop, args=(t0_s,), name="tokenprobe-scraper", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self, t0_s: float) -> None:
        tick = 0
        while not self._stop.is_set():
            wait_s = t0_s + tick * self.period_s - now_s()
            if wait_s > 0 and self._stop.wait(wait_s):
                break
            sample = self.scrape_once(now_s() - t0_s)
            self.samples.append(sample)
            if self.on_sample is not None:
                self.on_sample(sample)
            tick = max(int((now_s() - t0_s) / self.period_s) + 1, tick + 1)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
