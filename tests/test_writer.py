"""The group-commit writer: a failing job is undone alone, beside jobs that commit, and no job runs twice."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from broker.store.sql import Flush, connect
from broker.store.writer import GroupCommitWriter


# Some jobs run alone (a transaction of their own, with no savepoint), among the others.
@pytest.mark.parametrize("alone", [(), (5, 10, 15, 16, 30)], ids=["together", "some alone"])
def test_a_failing_job_is_undone_alone_and_no_job_in_its_group_runs_twice(tmp_path, alone):
    conn = connect(tmp_path / "w.db", Flush.ASYNC)
    conn.execute("CREATE TABLE t (n INTEGER)")
    writer = GroupCommitWriter(conn)
    runs: list[int] = []

    def job(n: int):
        def work(c: sqlite3.Connection) -> int:
            runs.append(n)
            c.execute("INSERT INTO t VALUES (?)", (n,))
            if n in alone:  # no savepoint: SQLite keeps no copy of the pages the job changes
                with pytest.raises(sqlite3.OperationalError, match="no such savepoint"):
                    c.execute("RELEASE job")
            if n % 3 == 0:
                raise ValueError(f"job {n} fails after writing")
            return n

        return work

    async def submit_together() -> list[object]:
        return await asyncio.gather(
            *(writer.run(job(n), alone=n in alone) for n in range(1, 31)), return_exceptions=True
        )

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


def test_single_sends_prepares_and_ends_sent_together_are_written_as_one_job_each_with_their_own_outcomes(
    tmp_path,
):
    """A RocketMQ producer's threads send messages, half messages and ends one at a time: those
    that arrive together are one writer job, and a refused item fails alone."""
    from broker.delays import DelayService
    from broker.errors import TopicNotFound, TransactionNotFound
    from broker.messaging import MessagingService
    from broker.metrics import Metrics
    from broker.model import Message, MessageType, Resolution, Source, TransactionState
    from broker.store import Store
    from broker.transaction.service import TransactionService
    from tests.support import topic_rows

    jobs = [0]

    async def together(calls) -> tuple[list[object], int]:
        before = jobs[0]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        return outcomes, jobs[0] - before

    async def scenario():
        store = Store(tmp_path, flush=Flush.ASYNC, on_commit=lambda n, _: jobs.__setitem__(0, jobs[0] + n))
        service = TransactionService(store, max_body_bytes=1024, metrics=Metrics())
        await store.create_topic("t", 2, None, MessageType.TRANSACTION)
        topics = ["t"] * 20 + ["missing"]
        prepared = await together(
            service.prepare(Message(topic, f"m{i}".encode(), f"id-{i}"), "g") for i, topic in enumerate(topics)
        )
        ids = [txn.transaction_id for txn in prepared[0][:20]] + ["0" * 32]
        ended = await together(service.end(txid, "g", Resolution.COMMIT, Source.CLIENT) for txid in ids)
        messaging = MessagingService(store, DelayService(store, max_delay=60), max_body_bytes=1024)
        await store.create_topic("plain", 2)
        sent = await together(
            messaging.send_one(Message(topic, f"p{i}".encode(), f"p-{i}"), typed=False)
            for i, topic in enumerate(["plain"] * 20 + ["missing"])
        )
        store.close()
        return prepared, ended, sent

    (prepared, prepare_jobs), (ended, end_jobs), (sent, send_jobs) = asyncio.run(scenario())
    assert (prepare_jobs, end_jobs, send_jobs) == (1, 1, 1)
    assert isinstance(prepared[-1], TopicNotFound) and isinstance(ended[-1], TransactionNotFound)
    assert isinstance(sent[-1], TopicNotFound)
    assert sorted(body for *_, body in topic_rows(tmp_path, "plain")) == sorted(f"p{i}".encode() for i in range(20))
    assert [r.state for r in ended[:20]] == [TransactionState.COMMITTED] * 20
    assert sorted(body for *_, body in topic_rows(tmp_path, "t")) == sorted(f"m{i}".encode() for i in range(20))


def test_callers_waiting_on_a_batch_that_is_cancelled_hear_so_instead_of_waiting_for_ever():
    from broker.coalesce import Coalescer
    from broker.errors import BrokerClosed

    async def scenario() -> list[object]:
        async def never(items: list[int]) -> list[int]:
            await asyncio.Event().wait()
            return items

        coalescer: Coalescer[int, int] = Coalescer(never, 1)  # one item per batch: the second waits its turn
        calls = [asyncio.create_task(coalescer.submit(n)) for n in (1, 2)]
        await asyncio.sleep(0.01)
        running = coalescer._running
        assert running is not None
        running.cancel()  # as the broker's loop cancels its tasks when it stops
        return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 5)

    assert [type(outcome) for outcome in asyncio.run(scenario())] == [BrokerClosed, BrokerClosed]
