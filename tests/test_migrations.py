"""A store made by the release before schema v2 opens under this one and is migrated in place
(issue 11): every row of every table kept, the new settings in force, the broker working on it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from broker.errors import StorageFailure
from broker.model import HALF_TOPIC, OP_TOPIC, SYSTEM_PROPERTIES, Message, Resolution
from broker.store import Store
from broker.store.base import DB_FILE
from broker.store.migrate import MIGRATIONS
from broker.store.schema import VERSION
from producer_sdk import PullConsumer
from tests.support import BrokerThread, broker_settings, store_snapshot

V1_STORE = Path(__file__).parent / "fixtures" / "v1-store.db"


def user_properties(properties: str) -> dict[str, str]:
    return {k: v for k, v in json.loads(properties).items() if k not in SYSTEM_PROPERTIES}


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
        # v5: each half message is in its transaction's row, with the producer's properties only;
        # each op record is in the op log; both logs' next offsets are kept as floors.
        # v6: no batch column (batches are open ranges), and none is open.
        # v8: every topic accepts every message type; no delayed message waits.
        topics = [(*row, None, None) for row in before.pop("topics")]
        logs = {HALF_TOPIC: [], OP_TOPIC: []}
        for row in before["messages"]:
            logs.get(row[1], []).append(row)
        halves = {row[3]: row for row in logs[HALF_TOPIC]}
        transactions = [(*row, *halves[row[1]][6:8], user_properties(halves[row[1]][8]), *halves[row[1]][9:11])
                        for row in before.pop("transactions")]  # fmt: skip
        after = store_snapshot(v1_dir)
        after["transactions"] = [(*row[:15], user_properties(row[15]), *row[16:]) for row in after["transactions"]]
        assert after == {
            **before,
            "messages": [row for row in before["messages"] if row[1] not in logs],
            "topics": topics,
            "queue_floors": sorted([(topic, 0, max(r[3] for r in rows) + 1) for topic, rows in logs.items()], key=repr),
            "transactions": sorted(transactions, key=repr),
            "op_log": sorted([(r[3], int(r[9]), r[11]) for r in logs[OP_TOPIC]], key=repr),
            "committed_batches": [],
            "open_ranges": [],
            "transactional_ids": [],
            "txn_offsets": [],
            "delayed": [],
            "delayed_counts": [],
            "consumer_groups": [],
            "control_offsets": [],
            "segments.db:segments": [],  # the broker's packer finds no queue with a whole segment
        }
        assert len(logs[HALF_TOPIC]) == 4 and len(logs[OP_TOPIC]) == 2
        with PullConsumer(group="audit", broker=broker.address) as consumer:
            assert consumer.committed_offsets("orders") == {0: 2}
            bodies = sorted(m.body for q in (0, 1) for m in consumer.pull("orders", queue_id=q, offset=0).messages)
        assert bodies == sorted([f"normal-{i}".encode() for i in range(6)] + [b"txn-0"])
        assert broker.broker.store.pending_count() == 2
        # A half message moved by v5 commits as it was sent, and the half log goes on where it was.
        core = broker.broker
        broker.run(core.transactions.operator_end(f"{2:032x}", Resolution.COMMIT))
        with PullConsumer(group="audit", broker=broker.address) as consumer:
            message = consumer.pull("orders", queue_id=0, offset=0).messages[-1]
        # It had been checked once (the v1 store's count), which the committed message tells.
        expected = (b"txn-2", "t-2", {"TRANSACTION_CHECK_TIMES": "1"})
        assert (message.body, message.message_id, message.properties) == expected
        (fresh,) = broker.run(core.transactions.prepare_many([(Message("orders", b"new", "t-new"), "g")]))
        assert fresh.half_offset == 4, "the half log's next offset, none reused"
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


def test_v6_rolls_back_the_half_messages_of_batches_still_pending_and_drops_their_column(v1_dir):
    conn = sqlite3.connect(v1_dir / DB_FILE, isolation_level=None)
    db = sqlite_utils.Database(conn)
    for target in range(2, 6):  # the store as v5 left it
        MIGRATIONS[target](db)
        conn.execute(f"PRAGMA user_version = {target}")
    pending = [txid for (txid,) in conn.execute("SELECT transaction_id FROM transactions WHERE state = 'PENDING'")]
    conn.execute("UPDATE transactions SET batch_id = 0 WHERE transaction_id = ?", (pending[0],))
    (ops,) = conn.execute("SELECT COUNT(*) FROM op_log").fetchone()
    conn.close()
    store = Store(v1_dir)
    try:
        assert store.transaction(pending[0]).state.value == "ROLLED_BACK", "its query prepares the batch again"
        assert store.transaction(pending[1]).state.value == "PENDING", "a plain half message waits for its check"
    finally:
        store.close()
    with sqlite3.connect(v1_dir / DB_FILE) as conn:
        assert conn.execute("SELECT COUNT(*) FROM op_log").fetchone() == (ops + 1,)
        assert "batch_id" not in {row[1] for row in conn.execute("PRAGMA table_info(transactions)")}
        assert "messages" in {row[1] for row in conn.execute("PRAGMA table_info(committed_batches)")}


def test_v7_keeps_the_open_ranges_of_batches_as_ranges_of_no_transactional_id(v1_dir):
    conn = sqlite3.connect(v1_dir / DB_FILE, isolation_level=None)
    db = sqlite_utils.Database(conn)
    for target in range(2, 7):  # the store as v6 left it
        MIGRATIONS[target](db)
        conn.execute(f"PRAGMA user_version = {target}")
    conn.executescript(DDL_V6_OPEN_RANGES)
    conn.execute(
        "INSERT INTO open_ranges (producer_group, batch_id, topic, queue_id, first_offset, end_offset, opened_at)"
        " VALUES ('spark-q1', 3, 'orders', 0, 10, 12, 5)"
    )
    conn.close()
    store = Store(v1_dir)
    try:
        assert store.oldest_open_range() == 5, "the batch sweep still sees it"
    finally:
        store.close()
    with sqlite3.connect(v1_dir / DB_FILE) as conn:
        assert conn.execute("SELECT producer_group, batch_id, transactional_id FROM open_ranges").fetchall() == [
            ("spark-q1", 3, None)
        ]


# open_ranges as schema v6 made it, before v7 added transactional_id.
DDL_V6_OPEN_RANGES = """
CREATE TABLE IF NOT EXISTS open_ranges (
    range_id INTEGER PRIMARY KEY AUTOINCREMENT,
    producer_group TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    opened_at INTEGER NOT NULL
);
"""


def test_v9_keeps_the_retry_policies_of_v8_and_makes_every_group_concurrent(tmp_path):
    data = tmp_path / "data"
    Store(data).close()
    with sqlite3.connect(data / DB_FILE) as conn:  # the consumer groups as v8 made them
        conn.execute("DROP TABLE consumer_groups")
        conn.execute("CREATE TABLE consumer_groups (name TEXT PRIMARY KEY, max_attempts INTEGER, backoff TEXT)")
        conn.execute("INSERT INTO consumer_groups VALUES ('workers', 3, '[1.5]')")
        conn.execute("PRAGMA user_version = 8")
    store = Store(data)
    try:
        assert store.retry_policy_of("workers") == (3, (1.5,), False)
        assert store.retry_policy_of("others") == (None, None, False)
    finally:
        store.close()
    assert pragmas(data)[0] == VERSION
