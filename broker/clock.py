"""Time as the broker sees it. Every age and timestamp uses the broker's clock, never a producer's."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]
"""Seconds since the epoch; tests pass a fake one."""

system_clock: Clock = time.time


def to_ms(seconds: float) -> int:
    return int(seconds * 1000)
