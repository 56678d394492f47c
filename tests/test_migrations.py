"""A store made by the release before schema v2 opens under this one and is migrated in place
(issue 11): every row of every table kept, the new settings in force, the broker working on it."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from broker.errors import StorageFailure
from broker.store import Store
from broker.store.base import DB_FILE
from broker.store.schema import VERSION
from producer_sdk import PullConsumer
from tests.support import BrokerThread, broker_settings, store_snapshot

V1_STORE = Path(__file__).parent / "fixtures" / "v1-store.db"


def pragmas(data_dir: Path) -> tuple[int, int]:
    with sqlite3.connect(data_dir / DB_FILE) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0], conn.execute("PRAGMA auto_vacuum").fetchone()[0]


@pytest.fixture
def v1_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(V1_STORE, data / DB_FILE)
    return data


def test_a_v1_store_is_migrated_in_place_and_keeps_every_row(v1_dir):
    assert pragmas(v1_dir) == (1, 0)
    before = store_snapshot(v1_dir)
    # Its messages and halves are from 2023: kept by no retention and no half age.
    broker = BrokerThread(broker_settings(v1_dir, topics=(), max_half_age=1e10, retention=0))
    try:
        assert pragmas(v1_dir) == (VERSION, 2)  # 2: incremental auto-vacuum
        # v3: every topic follows the broker's retention; no queue was emptied by retention yet.
        # v4: no transaction belongs to a two-phase batch, and no batch was committed.
        topics = [(*row, None) for row in before.pop("topics")]
        transactions = [(*row, None) for row in before.pop("transactions")]
        assert store_snapshot(v1_dir) == {
            **before,
            "topics": topics,
            "queue_floors": [],
            "transactions": transactions,
            "committed_batches": [],
            "segments.db:segments": [],  # the broker's packer finds no queue with a whole segment
        }
        with PullConsumer(group="audit", broker=broker.address) as consumer:
            assert consumer.committed_offsets("orders") == {0: 2}
            bodies = sorted(m.body for q in (0, 1) for m in consumer.pull("orders", queue_id=q, offset=0).messages)
        assert bodies == sorted([f"normal-{i}".encode() for i in range(6)] + [b"txn-0"])
        assert broker.broker.store.pending_count() == 2
    finally:
        broker.stop()
    assert pragmas(v1_dir) == (VERSION, 2), "a second open finds nothing to do"


def test_a_new_store_starts_at_the_current_version_and_a_newer_one_is_refused(tmp_path):
    Store(tmp_path / "new").close()
    assert pragmas(tmp_path / "new") == (VERSION, 2)
    with sqlite3.connect(tmp_path / "new" / DB_FILE) as conn:
        conn.execute(f"PRAGMA user_version = {VERSION + 1}")
    with pytest.raises(StorageFailure, match="newer"):
        Store(tmp_path / "new")
