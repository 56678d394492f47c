"""The durable store: SQLite in WAL mode behind a small interface, written by one group-commit thread."""

from broker.store.sqlite_store import Flush, Store

__all__ = ["Flush", "Store"]
