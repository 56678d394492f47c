"""When a RocketMQ message is due: its delay level (RocketMQ 4's ``DELAY`` property, levels 1 to
18) or its timer properties (RocketMQ 5's ``TIMER_DELIVER_MS``, ``TIMER_DELAY_MS``,
``TIMER_DELAY_SEC``)."""

from __future__ import annotations

from collections.abc import Mapping

# messageDelayLevel's default: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DELAY_LEVELS = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
DELIVER_MS, DELAY_MS, DELAY_SEC = "TIMER_DELIVER_MS", "TIMER_DELAY_MS", "TIMER_DELAY_SEC"


def is_timer(properties: Mapping[str, str]) -> bool:
    """Whether a message says when it is due by a timer property (not by a delay level)."""
    return any(name in properties for name in (DELIVER_MS, DELAY_MS, DELAY_SEC))


def due_at(properties: Mapping[str, str], now_ms: int) -> int | None:
    """The broker time (ms) a message with ``properties`` is due, or None when it is not delayed.
    A level above 18 counts as 18, as RocketMQ's broker takes it. Raises ValueError for a value
    that is not a number."""
    if DELIVER_MS in properties:
        return int(properties[DELIVER_MS])
    if DELAY_MS in properties:
        return now_ms + int(properties[DELAY_MS])
    if DELAY_SEC in properties:
        return now_ms + int(properties[DELAY_SEC]) * 1000
    level = int(properties.get("DELAY", "0"))
    if level <= 0:
        return None
    return now_ms + DELAY_LEVELS[min(level, len(DELAY_LEVELS)) - 1] * 1000
