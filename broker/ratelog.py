"""Logging that cannot flood: one line per kind of failure per interval, with a count of the rest."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    """Logs a kind of failure at most once per ``interval`` seconds, then says how many it held back."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, kind: str, message: str, *args: object) -> None:
        """Log ``message`` (one line, no traceback) unless ``kind`` was logged within the interval."""
        now = self._clock()
        if now - self._last.get(kind, -self._interval) < self._interval:
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        held = self._held.pop(kind, 0)
        suffix = f" ({held} more since the last report)" if held else ""
        self._last[kind] = now
        self._logger.warning(message + suffix, *args)
