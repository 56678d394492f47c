"""Offline tools on a data directory, with sqlite-utils: inspect and export only read (so they work
beside a running broker); compact rewrites the file, so it refuses while a broker holds the
directory. The broker's hot paths stay on sqlite3, which they measure against; these are not hot."""

from __future__ import annotations

import base64
import csv
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import sqlite_utils

from broker.errors import StoreInUse
from broker.model import SYSTEM_TOPICS
from broker.store.base import DB_FILE, bytes_on_disk, file_size, store_files
from broker.store.lock import lock_data_dir

EXPORT_FIELDS = ("queue_id", "queue_offset", "message_id", "keys", "tags", "properties", "body_base64",
                 "born_timestamp", "store_timestamp")  # fmt: skip


class StoreToolError(Exception):
    """A tool cannot run on this directory; the message says why."""


def _store_file(data_dir: Path) -> Path:
    path = data_dir / DB_FILE
    if not path.exists():
        raise StoreToolError(f"{data_dir} holds no halfmq store ({DB_FILE} is missing)")
    return path


def _open(data_dir: Path) -> sqlite_utils.Database:
    conn = sqlite3.connect(_store_file(data_dir))
    conn.execute("PRAGMA query_only = ON")  # nothing here writes, even by mistake
    return sqlite_utils.Database(conn)


def inspect(data_dir: Path) -> dict[str, Any]:
    """Schema version, bytes on disk (``file_bytes``: every file of the store, as the broker counts
    them for --retention-bytes and reports them; ``wal_bytes``: the write-ahead logs among them,
    where recent writes live until a checkpoint copies them), and rows per table."""
    db = _open(data_dir)
    try:
        return {
            "schema_version": db.execute("PRAGMA user_version").fetchone()[0],
            "file_bytes": bytes_on_disk(data_dir),
            "wal_bytes": sum(file_size(path) for path in store_files(data_dir) if path.name.endswith("-wal")),
            "tables": {name: db.table(name).count for name in db.table_names() if name != "sqlite_sequence"},
        }
    finally:
        db.close()


def export(data_dir: Path, topic: str, fmt: str, write: Callable[[str], object]) -> int:
    """Write the committed messages of ``topic`` in queue and offset order, as JSON lines or CSV
    (bodies in base64, keys and properties as JSON in CSV); return how many."""
    if topic in SYSTEM_TOPICS:
        raise StoreToolError(f"{topic} is a hidden system topic; only committed topics are exported")
    db = _open(data_dir)
    try:
        if not db.execute("SELECT 1 FROM topics WHERE name = ?", [topic]).fetchone():
            raise StoreToolError(f"topic {topic!r} does not exist")
        rows = _export_rows(db, topic)
        count = 0
        if fmt == "jsonl":
            for row in rows:
                write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
        else:
            writer = csv.DictWriter(SimpleNamespace(write=write), EXPORT_FIELDS)
            writer.writeheader()
            for row in rows:
                writer.writerow({**row, "keys": json.dumps(row["keys"]), "properties": json.dumps(row["properties"])})
                count += 1
        return count
    finally:
        db.close()


def _export_rows(db: sqlite_utils.Database, topic: str) -> Iterator[dict[str, Any]]:
    for row in db.query(
        "SELECT queue_id, queue_offset, message_id, keys, tags, properties, body, born_timestamp, store_timestamp"
        " FROM messages m WHERE topic = ? AND queue_offset < COALESCE((SELECT MIN(first_offset) FROM open_ranges r"
        " WHERE r.topic = m.topic AND r.queue_id = m.queue_id), 1 << 62) ORDER BY queue_id, queue_offset",
        [topic],
    ):
        body = row.pop("body")
        yield {**row, "keys": json.loads(row["keys"]), "properties": json.loads(row["properties"]),
               "body_base64": base64.b64encode(body).decode()}  # fmt: skip


def compact(data_dir: Path) -> dict[str, int]:
    """VACUUM the store (it must not be in use); return what every file of it takes on disk
    before and after."""
    path = _store_file(data_dir)
    try:
        lock = lock_data_dir(data_dir)
    except StoreInUse as exc:
        raise StoreToolError(f"{exc}; stop it before compacting") from exc
    with lock:
        before = bytes_on_disk(data_dir)
        db = sqlite_utils.Database(path)
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.vacuum()
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # VACUUM wrote the new file into the log
        finally:
            db.close()
        return {"bytes_before": before, "bytes_after": bytes_on_disk(data_dir)}
