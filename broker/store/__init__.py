"""The durable store: SQLite in WAL mode behind a small interface, written by one group-commit thread."""

from broker.store.sql import Flush
from broker.store.sqlite_store import DB_FILE, Store

__all__ = ["DB_FILE", "Flush", "Store"]
