"""Offsets of the halfmq source as pure code: option parsing, resolution, admission control.

An offset is ``{topic: {queue_id: offset}}``: the next message to read in each queue. Spark stores
offsets as JSON, whose keys are strings: ``to_json``/``from_json`` convert.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

Offsets = dict[str, dict[int, int]]
Ranges = Mapping[str, Mapping[int, tuple[int, int]]]
"""``{topic: {queue_id: (min_offset, max_offset)}}`` as the broker reports them (max is one past the newest)."""

EARLIEST = "earliest"
LATEST = "latest"
# Kafka's sentinels inside a JSON offset: -2 earliest, -1 latest.
_SENTINELS = {-2: EARLIEST, -1: LATEST}


class OffsetError(ValueError):
    """Raised for a malformed offset option or an offset the broker cannot serve."""


class DataLoss(OffsetError):
    """Raised when requested messages no longer exist (or never did) and failOnDataLoss is true."""


Position = str | dict[str, dict[int, int]]


def parse_position(option: str, text: str | None, default: str, *, allow_earliest: bool = True) -> Position:
    """``earliest`` | ``latest`` | JSON ``{"topic": {"queue": offset}}`` (offset -2 earliest, -1 latest)."""
    if text is None or not text.strip():
        return default
    value = text.strip()
    if value.lower() in (EARLIEST, LATEST):
        if value.lower() == EARLIEST and not allow_earliest:
            raise OffsetError(f"{option} cannot be 'earliest'")
        return value.lower()
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise OffsetError(
            f"{option} must be 'earliest', 'latest' or JSON like {{\"orders\": {{\"0\": 42}}}}, got {text!r}"
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(q, dict) for q in parsed.values()):
        raise OffsetError(f"{option} JSON must map topic -> {{queue: offset}}, got {text!r}")
    try:
        return {topic: {int(q): int(o) for q, o in queues.items()} for topic, queues in parsed.items()}
    except (TypeError, ValueError):
        raise OffsetError(f"{option} JSON queues and offsets must be integers, got {text!r}") from None


def resolve(option: str, position: Position, ranges: Ranges) -> Offsets:
    """Turn a position into concrete offsets for every queue of every topic in ``ranges``.

    A JSON position must name exactly the subscribed topics and every queue of each.
    """
    if position == EARLIEST:
        return {t: {q: low for q, (low, _) in queues.items()} for t, queues in ranges.items()}
    if position == LATEST:
        return {t: {q: high for q, (_, high) in queues.items()} for t, queues in ranges.items()}
    assert isinstance(position, dict)
    if set(position) != set(ranges):
        raise OffsetError(f"{option} names topics {sorted(position)}, but the query reads {sorted(ranges)}")
    resolved: Offsets = {}
    for topic, queues in ranges.items():
        if set(position[topic]) != set(queues):
            raise OffsetError(
                f"{option} for topic {topic!r} must name every queue {sorted(queues)}, got {sorted(position[topic])}"
            )
        resolved[topic] = {}
        for queue, offset in position[topic].items():
            low, high = queues[queue]
            if offset in _SENTINELS:
                offset = low if _SENTINELS[offset] == EARLIEST else high
            elif offset < 0:
                raise OffsetError(f"{option}: offset {offset} of {topic}/{queue} is negative")
            resolved[topic][queue] = offset
    return resolved


def check_available(start: Offsets, ranges: Ranges, fail_on_data_loss: bool) -> Offsets:
    """Return ``start`` if the broker can serve it; otherwise raise DataLoss, or, when
    ``fail_on_data_loss`` is false, move each unservable queue to its earliest offset."""
    checked: Offsets = {}
    for topic, queues in start.items():
        checked[topic] = {}
        for queue, offset in queues.items():
            low, high = ranges[topic][queue]
            if low <= offset <= high:
                checked[topic][queue] = offset
                continue
            problem = (
                "no longer stored" if offset < low else "beyond the newest message (was the broker's store replaced?)"
            )
            if fail_on_data_loss:
                raise DataLoss(
                    f"{topic}/{queue} offset {offset} is {problem}; the queue holds [{low}, {high}). "
                    "Set failOnDataLoss=false to skip to the earliest available offset."
                )
            checked[topic][queue] = low
    return checked


def admit(start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
    """The end offset of the next micro-batch: ``latest``, or, when the backlog exceeds
    ``max_rows``, a share of ``max_rows`` per queue in proportion to its backlog (largest
    remainders first, so exactly ``max_rows`` are admitted)."""
    backlog = {(t, q): max(latest[t][q] - start[t].get(q, 0), 0) for t in latest for q in latest[t]}
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        return {t: dict(queues) for t, queues in latest.items()}
    shares = {key: max_rows * n / total for key, n in backlog.items()}
    granted = {key: int(share) for key, share in shares.items()}
    spare = max_rows - sum(granted.values())
    for key in sorted(shares, key=lambda k: (shares[k] - granted[k], backlog[k]), reverse=True)[:spare]:
        granted[key] += 1
    return {t: {q: start[t].get(q, 0) + granted[(t, q)] for q in latest[t]} for t in latest}


def cap(offsets: Offsets, target: Offsets) -> Offsets:
    """``offsets`` no further than ``target`` in any queue (Trigger.AvailableNow's end)."""
    return {t: {q: min(o, target[t][q]) for q, o in queues.items()} for t, queues in offsets.items()}


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    return {t: {str(q): o for q, o in sorted(queues.items())} for t, queues in sorted(offsets.items())}


def from_json(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {t: {int(q): int(o) for q, o in queues.items()} for t, queues in value.items()}
