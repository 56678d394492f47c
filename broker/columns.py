"""Messages of one topic as columns, as a producer sends a table: checked a column at a time with
pyarrow compute, with ``check_message``'s limits and errors, and turned into the rows the store
appends.

A message is looked at on its own only when its keys or properties are not of the common forms
(none, or one key of printable ASCII), or when a column fails a check: then ``check_message``
gives it the same error a single send would. A few messages already apart (``check_messages``)
are checked one at a time: up to about 200, that costs less than the columns' fixed costs (some 25
Arrow calls, about 0.5 ms).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.errors import HalfmqError, InvalidArgument
from broker.model import Message, MessageRows, check_message
from broker.store.logs import rows_of
from broker.store.sql import PLAIN_CHAR, json_list, json_object

if TYPE_CHECKING:  # pyarrow is imported where used: a broker that is never sent a table never loads it
    import pyarrow as pa

# Counted repeats ({1,128}) would make RE2 compile a state per count on every call: lengths are
# checked apart.
_MESSAGE_ID = r"^[A-Za-z0-9_.:-]+$"
# One key of plain characters: its JSON, the stored form, is the key as it is between '["' and '"]'.
ONE_KEY = rf'^\["{PLAIN_CHAR}+"\]$'
_NO_KEYS, _NO_PROPERTIES = "[]", "{}"


@dataclass(frozen=True)
class MessageColumns:
    """One value per message: ``bodies`` binary, the rest UTF-8 text as binary (keys a JSON array
    of strings, properties a JSON object of strings), born timestamps int64 (ms). A column that is
    None holds every message's default."""

    topic: str
    message_ids: pa.Array
    keys: pa.Array | None
    tags: pa.Array | None
    properties: pa.Array | None
    bodies: pa.Array
    born_timestamps: pa.Array | None

    def __len__(self) -> int:
        return len(self.bodies)

    def slice(self, start: int, length: int) -> MessageColumns:
        """Messages ``start`` to ``start + length`` (fewer at the end)."""

        def part(column: pa.Array | None) -> pa.Array | None:
            return None if column is None else column.slice(start, length)

        return MessageColumns(
            self.topic, part(self.message_ids), part(self.keys), part(self.tags), part(self.properties),
            part(self.bodies), part(self.born_timestamps),
        )  # fmt: skip


@dataclass(frozen=True)
class CheckedColumns:
    """The messages that passed (``rows``, in table order) and the refused ones' errors, by index."""

    rows: MessageRows
    refused: dict[int, HalfmqError]


def check_columns(columns: MessageColumns, max_message_bytes: int) -> CheckedColumns:
    """Check every message of ``columns`` as ``check_message`` would, a column at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(columns)
    refused: dict[int, HalfmqError] = {}
    ids = _text(columns.message_ids, "message_id", refused)
    keys = _text(columns.keys, "keys", refused, _NO_KEYS, count)
    tags = _text(columns.tags, "tags", refused, "", count)
    properties = _text(columns.properties, "properties", refused, _NO_PROPERTIES, count)
    # The common forms, checked as columns; anything else is a message to look at on its own.
    one_key = pc.and_(pc.match_substring_regex(keys, ONE_KEY), pc.less_equal(pc.binary_length(keys), 1024 + 4))
    common = pc.and_(
        pc.and_(pc.match_substring_regex(ids, _MESSAGE_ID), pc.less_equal(pc.binary_length(ids), 128)),
        pc.and_(pc.and_(pc.or_(pc.equal(keys, _NO_KEYS), one_key), pc.equal(properties, _NO_PROPERTIES)),
                pc.less_equal(pc.utf8_length(tags), 1024)),
    )  # fmt: skip
    key_bytes = pc.if_else(pc.equal(keys, _NO_KEYS), 0, pc.subtract(pc.binary_length(keys), 4))
    sizes = pc.add(pc.add(pc.binary_length(columns.bodies), pc.binary_length(tags)), key_bytes)
    alone = pc.or_(pc.invert(common), pc.greater(sizes, max_message_bytes))
    stored_keys, stored_properties = keys.to_pylist(), properties.to_pylist()
    for index in pc.indices_nonzero(alone).to_pylist():
        if index in refused:
            continue
        try:
            message = _message(columns, index, ids, stored_keys[index], tags, stored_properties[index])
            check_message(message, max_message_bytes)
        except HalfmqError as exc:
            refused[index] = exc
            continue
        stored_keys[index] = json_list(message.keys)
        stored_properties[index] = json_object(message.properties)
    born = columns.born_timestamps if columns.born_timestamps is not None else pa.repeat(0, count)
    rows = MessageRows(
        [columns.topic] * count, ids.to_pylist(), stored_keys, tags.to_pylist(), stored_properties,
        columns.bodies.to_pylist(), born.to_pylist(),
    )  # fmt: skip
    return CheckedColumns(rows.take([i for i in range(count) if i not in refused]) if refused else rows, refused)


def check_messages(messages: Sequence[Message], max_message_bytes: int) -> CheckedColumns:
    """``check_columns`` of messages already apart, each checked by ``check_message``."""
    refused: dict[int, HalfmqError] = {}
    for index, message in enumerate(messages):
        try:
            check_message(message, max_message_bytes)
        except HalfmqError as exc:
            refused[index] = exc
    return CheckedColumns(rows_of([m for i, m in enumerate(messages) if i not in refused]), refused)


def _text(
    column: pa.Array | None, name: str, refused: dict[int, HalfmqError], default: str = "", count: int = 0
) -> pa.Array:
    """A binary column as UTF-8 strings (None: ``count`` defaults); a value that is not UTF-8 is
    refused and stands as the default."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column is None:
        return pa.repeat(pa.scalar(default), count)
    try:
        return pc.cast(column, pa.string())
    except pa.ArrowInvalid:
        values: list[str] = []
        for index, value in enumerate(column.to_pylist()):
            try:
                values.append(value.decode())
            except UnicodeDecodeError:
                refused[index] = InvalidArgument(f"{name} of message {index} is not UTF-8")
                values.append(default)
        return pa.array(values, pa.string())


def _message(columns: MessageColumns, index: int, ids: pa.Array, keys: str, tags: pa.Array, properties: str) -> Message:
    """Message ``index`` as a single send carries it, for ``check_message``."""
    born = columns.born_timestamps
    return Message(
        topic=columns.topic,
        body=columns.bodies[index].as_py(),
        message_id=ids[index].as_py(),
        keys=tuple(_json(keys, list, "keys", "an array")),
        tags=tags[index].as_py(),
        properties=_json(properties, dict, "properties", "an object"),
        born_timestamp=0 if born is None else born[index].as_py(),
    )


def _json(text: str, kind: type, name: str, what: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    strings = value if isinstance(value, list) else value.values() if isinstance(value, dict) else None
    if not isinstance(value, kind) or strings is None or not all(isinstance(s, str) for s in strings):
        raise InvalidArgument(f"{name} must be {what} of strings in JSON, got {text[:64]!r}")
    return value
