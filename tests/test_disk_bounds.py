"""The data directory on disk: the write-ahead logs are cut back once checkpoints have copied them
(to LOG_LIMIT at the writer's next commit, to nothing once the broker stops writing), so that what
retention deletes leaves the disk, and a steady load with retention stays under the bound
docs/operating.md states."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from broker.model import Message
from broker.store import Store
from broker.store.base import DB_FILE
from broker.store.sql import LOG_LIMIT
from producer_sdk import Message as SdkMessage
from producer_sdk import Producer
from tests.processes import started_broker

KB10 = 10 * 1024


def directory_bytes(data_dir: Path) -> int:
    """Every file in the data directory, whatever it is."""
    return sum(path.stat().st_size for path in data_dir.iterdir() if path.is_file())


def test_a_log_that_outgrew_its_limit_is_cut_back_at_the_writer_s_next_commit(tmp_path):
    data = tmp_path / "data"
    wal = data / f"{DB_FILE}-wal"

    async def scenario() -> None:
        store = Store(data)
        await store.create_topic("t", 1)
        reader = sqlite3.connect(data / DB_FILE, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM messages").fetchone()  # an old snapshot: no checkpoint gets past it
        for n in range(0, 4000, 500):
            await store.append([(Message("t", bytes(KB10), message_id=f"m{n + i}"), 0) for i in range(500)], 0)
        assert wal.stat().st_size > LOG_LIMIT
        reader.execute("COMMIT")
        reader.close()
        assert await store.in_background(store.checkpoint), "the whole log copied"
        await store.append([(Message("t", b"small", message_id="last"), 0)], 0)
        assert wal.stat().st_size <= LOG_LIMIT
        store.close()

    asyncio.run(scenario())


class Sizes(threading.Thread):
    """The data directory's size, sampled every second: (seconds since start, bytes)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(daemon=True)
        self._data_dir = data_dir
        self.samples: list[tuple[float, int]] = []
        self._done = threading.Event()
        self._began = time.monotonic()

    def run(self) -> None:
        while not self._done.wait(1.0):
            self.samples.append((time.monotonic() - self._began, directory_bytes(self._data_dir)))

    def stop(self) -> list[tuple[float, int]]:
        self._done.set()
        self.join()
        return self.samples


@pytest.mark.slow
@pytest.mark.e2e
def test_the_data_directory_shrinks_after_a_burst_once_retention_passed_it_while_small_sends_go_on(tmp_path):
    broker = started_broker(tmp_path, "--retention", "2")
    try:
        with Producer(broker=broker.address) as producer:
            began = time.monotonic()
            for n in range(100):  # 3,000 messages of 10 KB over 10 s
                producer.send_batch([SdkMessage(topic="orders", body=bytes(KB10)) for _ in range(30)])
                time.sleep(max(0.0, began + (n + 1) * 0.1 - time.monotonic()))
            sent, last = 3000 * KB10, time.monotonic()
            under: float | None = None  # seconds after the last large send when it first was under half
            while under is None or time.monotonic() - last < under + 20:
                since = time.monotonic() - last
                if int(since) % 10 == 0:
                    producer.send(SdkMessage(topic="orders", body=b"small"))  # one small send every 10 s
                size = directory_bytes(broker.data_dir)
                if under is None:
                    assert since < 40, f"{size} bytes on disk 40 s after {sent} bytes sent"
                    under = since if size < sent // 2 else None
                else:
                    assert size < sent // 2, f"{size} bytes on disk {since:.0f} s after {sent} bytes sent"
                time.sleep(1.0 - (time.monotonic() - last) % 1.0)
    finally:
        broker.stop()


# The soak's load: 10 KB messages at RATE a second, with --retention SOAK_RETENTION.
RATE, SOAK_RETENTION, SOAK_SECONDS = 400, 5, 180


def documented_bound(rate_bytes: float, retention: float) -> float:
    """docs/operating.md, "How much disk": the messages of the retention and a sweep interval more,
    1.6 times their size in rows and once more in segments, a quarter of each file kept free, and
    each write-ahead log at most LOG_LIMIT."""
    return rate_bytes * retention * 1.25 * (1.6 + 1) * 4 / 3 + 2 * LOG_LIMIT


@pytest.mark.slow
@pytest.mark.e2e
def test_a_steady_load_with_retention_keeps_the_data_directory_under_the_documented_bound(tmp_path):
    broker = started_broker(tmp_path, "--retention", str(SOAK_RETENTION))
    sizes = Sizes(broker.data_dir)
    sizes.start()
    try:
        with Producer(broker=broker.address) as producer:
            began, step = time.monotonic(), RATE // 10
            for n in range(SOAK_SECONDS * 10):
                producer.send_batch([SdkMessage(topic="orders", body=bytes(KB10)) for _ in range(step)])
                time.sleep(max(0.0, began + (n + 1) * 0.1 - time.monotonic()))
        samples = sizes.stop()
    finally:
        sizes.stop()
        broker.stop()
    bound = documented_bound(RATE * KB10, SOAK_RETENTION)
    largest = max(size for _, size in samples)
    assert len(samples) >= SOAK_SECONDS - 2
    assert largest < bound, f"{largest / 2**20:.0f} MiB on disk, over the documented {bound / 2**20:.0f} MiB"
    written = RATE * KB10 * SOAK_SECONDS
    assert largest < written / 8, "retention deleted most of what was written"
