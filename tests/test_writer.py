"""The group-commit writer: a failing job is undone alone, beside jobs that commit, and no job runs twice."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from broker.store.sql import Flush, connect
from broker.store.writer import GroupCommitWriter


def test_a_failing_job_is_undone_alone_and_no_job_in_its_group_runs_twice(tmp_path):
    conn = connect(tmp_path / "w.db", Flush.ASYNC)
    conn.execute("CREATE TABLE t (n INTEGER)")
    writer = GroupCommitWriter(conn)
    runs: list[int] = []

    def job(n: int):
        def work(c: sqlite3.Connection) -> int:
            runs.append(n)
            c.execute("INSERT INTO t VALUES (?)", (n,))
            if n % 3 == 0:
                raise ValueError(f"job {n} fails after writing")
            return n

        return work

    async def submit_together() -> list[object]:
        return await asyncio.gather(*(writer.run(job(n)) for n in range(1, 31)), return_exceptions=True)

    outcomes = asyncio.run(submit_together())
    writer.close()
    assert writer.batches < 30, "the jobs were committed in groups"
    assert sorted(runs) == list(range(1, 31)), "every job ran exactly once"
    assert [o for o in outcomes if isinstance(o, ValueError)] and all(
        isinstance(o, ValueError) == (n % 3 == 0) for n, o in enumerate(outcomes, 1)
    )
    stored = sorted(n for (n,) in connect(tmp_path / "w.db", Flush.ASYNC).execute("SELECT n FROM t"))
    assert stored == [n for n in range(1, 31) if n % 3]


def test_a_closed_writer_refuses_new_jobs(tmp_path):
    writer = GroupCommitWriter(connect(tmp_path / "w.db", Flush.ASYNC))
    writer.close()
    with pytest.raises(Exception, match="closed"):
        asyncio.run(writer.run(lambda c: None))


def test_queue_offsets_stay_dense_when_a_job_fails_after_taking_one(tmp_path):
    from broker.errors import StorageFailure
    from broker.model import Message
    from broker.store import Store

    async def scenario() -> list[int]:
        store = Store(tmp_path, flush=Flush.ASYNC)
        await store.create_topic("t", 1)
        await store.append([(Message("t", b"a", "a"), 0)], 0)
        conn = sqlite3.connect(tmp_path / "halfmq.db")  # SQLite refuses message "b" inside the insert
        conn.execute(
            "CREATE TRIGGER refuse_b BEFORE INSERT ON messages WHEN NEW.message_id = 'b'"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        conn.close()
        with pytest.raises(StorageFailure):  # fails inside the insert, after its offsets were taken
            await store.append([(Message("t", b"ok", "ok"), 0), (Message("t", b"b", "b"), 0)], 0)
        await store.append([(Message("t", b"c", "c"), 0)], 0)
        offsets = [m.queue_offset for m in store.read("t", 0, 0, 10, 1 << 20)]
        store.close()
        return offsets

    assert asyncio.run(scenario()) == [0, 1]
