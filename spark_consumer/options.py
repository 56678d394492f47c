"""Options of the ``halfmq`` Spark source, parsed and checked before any data is read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from spark_consumer.client import Connection
from spark_consumer.offsets import EARLIEST, LATEST, OffsetError, Position, parse_position

MAX_FETCH = 1024
BROKER = re.compile(r"[A-Za-z0-9_.\-\[\]:]+:\d{1,5}")
_KNOWN = {
    "broker",
    "topics",
    "startingoffsets",
    "endingoffsets",
    "maxoffsetspertrigger",
    "failondataloss",
    "fetchsize",
    "tlscafile",
    "token",
    "path",
}


class OptionError(ValueError):
    """Raised for a missing, unknown or malformed option of the halfmq source."""


@dataclass(frozen=True)
class SourceOptions:
    connection: Connection  # options broker, tlsCaFile (read on the driver) and token
    topics: tuple[str, ...]
    starting: Position
    ending: Position
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    fetch_size: int

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
        """Check every option; raise OptionError naming the bad one.

        ``streaming=None`` checks what does not depend on the kind of query (``DataSource.schema``
        does not know it yet).
        """
        given = {k.lower(): v for k, v in options.items()}
        unknown = sorted(set(given) - _KNOWN)
        if unknown:
            raise OptionError(f"unknown option(s) {unknown} for the halfmq source; known: {sorted(_KNOWN - {'path'})}")
        broker = given.get("broker", "")
        if not BROKER.fullmatch(broker):
            raise OptionError(f"option 'broker' must be host:port, got {broker!r}")
        topics = tuple(t.strip() for t in given.get("topics", "").split(",") if t.strip())
        if not topics or len(set(topics)) != len(topics):
            raise OptionError(
                f"option 'topics' must be a comma-separated list of distinct topics, got {given.get('topics')!r}"
            )
        if streaming is True and "endingoffsets" in given:
            raise OptionError("option 'endingOffsets' is for batch queries only")
        if streaming is False and "maxoffsetspertrigger" in given:
            raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries only")
        try:
            starting = parse_position(
                "startingOffsets", given.get("startingoffsets"), LATEST if streaming else EARLIEST
            )
            ending = parse_position("endingOffsets", given.get("endingoffsets"), LATEST, allow_earliest=False)
        except OffsetError as exc:
            raise OptionError(str(exc)) from None
        if streaming is False and starting == LATEST and "startingoffsets" in given:
            raise OptionError("startingOffsets='latest' reads nothing in a batch query; use 'earliest' or JSON")
        return cls(
            connection=Connection(broker, read_ca(given.get("tlscafile")), given.get("token") or None),
            topics=topics,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=_positive(given, "maxoffsetspertrigger", "maxOffsetsPerTrigger", None),
            fail_on_data_loss=_boolean(given.get("failondataloss", "true")),
            fetch_size=_positive(given, "fetchsize", "fetchSize", MAX_FETCH, most=MAX_FETCH) or MAX_FETCH,
        )


def _positive(
    given: Mapping[str, str], key: str, name: str, default: int | None, *, most: int | None = None
) -> int | None:
    if key not in given:
        return default
    bounds = "a positive integer" if most is None else f"an integer from 1 to {most}"
    try:
        value = int(given[key])
    except ValueError:
        raise OptionError(f"option {name!r} must be {bounds}, got {given[key]!r}") from None
    if value <= 0 or (most is not None and value > most):
        raise OptionError(f"option {name!r} must be {bounds}, got {value}")
    return value


def read_ca(path: str | None) -> bytes | None:
    """The PEM CA file's bytes, read here so that executors need no copy of the file."""
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise OptionError(f"option 'tlsCaFile' must name a readable PEM file: {exc}") from None


def _boolean(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option 'failOnDataLoss' must be true or false, got {text!r}")
    return text.strip().lower() == "true"
