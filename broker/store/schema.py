"""SQLite schema of the store. DDL is idempotent; ``PRAGMA user_version`` records the version, and
``migrate.py`` brings older files up to it."""

from __future__ import annotations

VERSION = 10

# The half message's columns of a ``transactions`` row. Its properties are the producer's only:
# the broker's (REAL_TOPIC and the rest) are the row's other columns. Defaults so that v5's
# migration can add them.
HALF_COLUMNS = (
    ("keys", "TEXT NOT NULL DEFAULT '[]'"),
    ("tags", "TEXT NOT NULL DEFAULT ''"),
    ("properties", "TEXT NOT NULL DEFAULT '{}'"),
    ("body", "BLOB NOT NULL DEFAULT x''"),
    ("born_timestamp", "INTEGER NOT NULL DEFAULT 0"),
)

_HALF_DDL = ",\n    ".join(f"{column} {declared}" for column, declared in HALF_COLUMNS)

DDL = f"""
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    queues INTEGER NOT NULL CHECK (queues > 0),
    -- Milliseconds its committed messages are kept; NULL follows the broker, 0 keeps them all.
    retention_ms INTEGER CHECK (retention_ms >= 0),
    -- The one message type it accepts (NORMAL, FIFO, DELAY, TRANSACTION); NULL accepts all.
    message_type TEXT
);

-- Delayed messages waiting for their time, with the queue they go to then (RocketMQ's timer
-- log). ``delay_id`` is the recall handle's number; AUTOINCREMENT so that a recalled or
-- delivered one's is never handed out again. Due ones are found through ``delayed_due`` alone:
-- the waiting ones are never scanned.
CREATE TABLE IF NOT EXISTS delayed (
    delay_id INTEGER PRIMARY KEY AUTOINCREMENT,
    due_at INTEGER NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    keys TEXT NOT NULL,
    tags TEXT NOT NULL,
    properties TEXT NOT NULL,
    body BLOB NOT NULL,
    born_timestamp INTEGER NOT NULL,
    stored_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS delayed_due ON delayed (due_at, delay_id);
-- A retried send of a delayed message is held once.
CREATE UNIQUE INDEX IF NOT EXISTS delayed_id ON delayed (topic, message_id);
-- A topic's first due time, for operators.
CREATE INDEX IF NOT EXISTS delayed_topic_due ON delayed (topic, due_at);
-- How many delayed messages wait per topic, kept by the writes that hold, deliver and recall
-- them (one change per topic and write: a trigger per row made holding 3.5 times as slow):
-- counting a million waiting rows took 0.6 s, too long for every dashboard refresh.
CREATE TABLE IF NOT EXISTS delayed_counts (
    topic TEXT PRIMARY KEY,
    waiting INTEGER NOT NULL
);

-- A consumer group's retry policy (RocketMQ's subscription group settings); NULL follows the
-- broker's --max-delivery-attempts, and RocketMQ's backoff.
CREATE TABLE IF NOT EXISTS consumer_groups (
    name TEXT PRIMARY KEY,
    max_attempts INTEGER CHECK (max_attempts > 0),
    -- JSON array of seconds between deliveries
    backoff TEXT,
    -- 1: a FIFO group, handed one message of a message group at a time
    fifo INTEGER NOT NULL DEFAULT 0
);

-- Where retention left each queue it deleted from: offsets below ``next_offset`` were used, so
-- a queue emptied by retention still knows its low offset and never hands out an offset again.
CREATE TABLE IF NOT EXISTS queue_floors (
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, queue_id)
);

-- The offsets a Kafka-model transaction's end took in each queue it wrote to, as Kafka's commit
-- and abort markers take one: no message has them; offsets below ``next_offset`` were used, so
-- none is handed out again, and a queue's end counts them.
CREATE TABLE IF NOT EXISTS control_offsets (
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, queue_id)
);

-- Every stored message of every topic but the half and op logs (kept in ``transactions`` and
-- ``op_log``). AUTOINCREMENT so that a store offset is never reused, even after the newest rows
-- are gone.
CREATE TABLE IF NOT EXISTS messages (
    store_offset INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    queue_offset INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    keys TEXT NOT NULL,
    tags TEXT NOT NULL,
    properties TEXT NOT NULL,
    body BLOB NOT NULL,
    born_timestamp INTEGER NOT NULL,
    store_timestamp INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_position ON messages (topic, queue_id, queue_offset);
-- One message id per topic: a retried send is stored once, a transaction's final message can
-- exist only once, whatever the race.
CREATE UNIQUE INDEX IF NOT EXISTS messages_id ON messages (topic, message_id);

-- The half log (RMQ_SYS_TRANS_HALF_TOPIC, offset ``half_offset``): one row per half message,
-- with the state of its transaction, which the op log's records change in the same SQLite
-- transaction. The check service reads only the PENDING rows through a partial index, so a round
-- costs O(pending), not O(history) (RocketMQ #1517). A half message is one row, not a message
-- row beside a transaction row: a transaction writes two rows fewer, and its final message is
-- copied from here.
CREATE TABLE IF NOT EXISTS transactions (
    transaction_id TEXT PRIMARY KEY,
    half_offset INTEGER NOT NULL UNIQUE,
    message_id TEXT NOT NULL UNIQUE,
    producer_group TEXT NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    check_times INTEGER NOT NULL DEFAULT 0,
    half_stored_at INTEGER NOT NULL,
    last_check_at INTEGER,
    resolved_at INTEGER,
    resolution_source TEXT,
    -- How many times an operator resumed it after a discard.
    resumes INTEGER NOT NULL DEFAULT 0,
    -- The half message as the producer sent it (HALF_COLUMNS).
    {_HALF_DDL}
);
CREATE INDEX IF NOT EXISTS transactions_pending ON transactions (half_stored_at) WHERE state = 'PENDING';
-- Each group's pending rows in age order: a round takes its share of every live group, so no
-- group's backlog (orphaned or not) starves another.
CREATE INDEX IF NOT EXISTS transactions_pending_group ON transactions (producer_group, half_stored_at)
    WHERE state = 'PENDING';

-- The op log (RMQ_SYS_TRANS_OP_HALF_TOPIC): one record per resolution (RocketMQ's tag d, body =
-- the half offset), in the SQLite transaction that resolves it. No index beside the offset: the
-- writer appends a record only when it moves a transaction out of PENDING, so each is unique by
-- construction, and retention deletes the log's oldest records by age.
CREATE TABLE IF NOT EXISTS op_log (
    op_offset INTEGER PRIMARY KEY,
    half_offset INTEGER NOT NULL,
    stored_at INTEGER NOT NULL
);

-- Messages of exactly-once batches (the Spark sink) stored where they will stay, in ``messages``,
-- but not committed yet: one row per prepared run of one queue, deleted when its batch commits
-- (the rows become visible) or rolls back (the rows are deleted). Readers of a queue stop at the
-- first offset of its first open range, its last stable offset. AUTOINCREMENT so that a range id
-- is never reused: a late commit of a range that was rolled back finds nothing, not another range.
CREATE TABLE IF NOT EXISTS open_ranges (
    range_id INTEGER PRIMARY KEY AUTOINCREMENT,
    producer_group TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    opened_at INTEGER NOT NULL,
    -- The Kafka-model transaction the range belongs to (``producer_group`` is then '', which no
    -- group is named); NULL for a range of an exactly-once batch.
    transactional_id TEXT
);
CREATE INDEX IF NOT EXISTS open_ranges_queue ON open_ranges (topic, queue_id, first_offset);
CREATE INDEX IF NOT EXISTS open_ranges_group ON open_ranges (producer_group, batch_id);
CREATE INDEX IF NOT EXISTS open_ranges_transactional ON open_ranges (transactional_id)
    WHERE transactional_id IS NOT NULL;

-- Kafka-model transactions: one row per transactional id, with its producer epoch (bumped by
-- every InitTransactions, which fences the producer that held the id before) and its current or
-- last transaction: ``txn_number`` counts them, ``state`` is READY (none yet), OPEN, COMMITTED or
-- ABORTED, and ``ended_by`` says who aborted (PRODUCER, FENCED or TIMEOUT). The messages of the
-- open transaction are open ranges of their queues; its consumer offsets wait in ``txn_offsets``.
CREATE TABLE IF NOT EXISTS transactional_ids (
    transactional_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    txn_number INTEGER NOT NULL,
    state TEXT NOT NULL,
    ended_by TEXT,
    began_at INTEGER,
    ended_at INTEGER,
    messages INTEGER NOT NULL DEFAULT 0,
    committed INTEGER NOT NULL DEFAULT 0,
    aborted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS transactional_ids_open ON transactional_ids (began_at) WHERE state = 'OPEN';

-- Consumer offsets sent to an open Kafka-model transaction: written to ``consumer_offsets`` when
-- it commits, in the same SQLite transaction, and dropped when it aborts.
CREATE TABLE IF NOT EXISTS txn_offsets (
    transactional_id TEXT NOT NULL,
    consumer_group TEXT NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    queue_offset INTEGER NOT NULL,
    PRIMARY KEY (transactional_id, consumer_group, topic, queue_id)
);

-- Batches committed by EndBatch, each recorded in the same SQLite transaction as its commit: a
-- batch commits at most once, however often it is replayed.
CREATE TABLE IF NOT EXISTS committed_batches (
    producer_group TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    PRIMARY KEY (producer_group, batch_id)
);
CREATE INDEX IF NOT EXISTS committed_batches_age ON committed_batches (committed_at);

-- Every check delivered to a producer, for operators (bounded: at most check_max per resume).
CREATE TABLE IF NOT EXISTS checks (
    transaction_id TEXT NOT NULL,
    check_no INTEGER NOT NULL,
    checked_at INTEGER NOT NULL,
    client_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_transaction ON checks (transaction_id);

-- Messages handed out to a consumer group with an invisible duration and not yet acknowledged
-- (RocketMQ 5's receive/ack model). Rows below the group's committed offset are deleted, so the
-- table holds only what is in flight or acknowledged out of order.
CREATE TABLE IF NOT EXISTS deliveries (
    consumer_group TEXT NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    queue_offset INTEGER NOT NULL,
    visible_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    handle_seq INTEGER NOT NULL,
    acked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer_group, topic, queue_id, queue_offset)
);

CREATE TABLE IF NOT EXISTS consumer_offsets (
    consumer_group TEXT NOT NULL,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    queue_offset INTEGER NOT NULL,
    PRIMARY KEY (consumer_group, topic, queue_id)
);
"""
