"""A full disk, for real: the store on a small tmpfs (guarantee 11). Writes get a typed refusal,
nothing acknowledged is lost, reads keep working, and the broker recovers when space returns."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from broker.model import TransactionState
from broker.store.base import DB_FILE
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import LocalTransactionState, Message, RocketMQTransactionProducer, TransactionListener
from tests.support import BrokerThread, FakeClock, broker_settings, topic_rows, wait_until

BODY = 64 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """Take all but ``leave`` bytes of the disk with a filler file."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    try:
        with filler.open("ab") as out:
            out.write(b"\0" * max(free - leave, 0))
    except OSError as exc:  # the broker wrote meanwhile (a checkpoint, say): the disk is full all the same
        if exc.errno != errno.ENOSPC:
            raise
    return filler


class FillsTheDisk(TransactionListener):
    """Its local transaction commits, and meanwhile something else fills the broker's disk."""

    def __init__(self, disk: Path) -> None:
        self.disk = disk

    def execute_local_transaction(self, msg, arg):
        fill(self.disk, leave=0)
        return LocalTransactionState.COMMIT

    def check_local_transaction(self, msg):
        return LocalTransactionState.COMMIT


def test_a_full_disk_refuses_writes_with_a_typed_error_and_the_broker_recovers_when_space_returns(small_disk, caplog):
    clock = FakeClock()
    broker = BrokerThread(broker_settings(small_disk / "data"), clock)
    try:
        with grpc.insecure_channel(broker.address) as channel:
            stub = pb_grpc.BrokerStub(channel)

            def send(n: int) -> pb.SendBatchResponse:
                return stub.SendBatch(pb.SendBatchRequest(messages=[pb.Message(
                    topic="orders", body=os.urandom(BODY), message_id=f"m-{n}")]))  # fmt: skip

            filler = fill(small_disk, leave=2 << 20)
            acknowledged, refusals = [], []
            with caplog.at_level(logging.WARNING, logger="broker.store.writer"):
                for n in range(200):
                    try:
                        send(n)
                        acknowledged.append(f"m-{n}")
                    except grpc.RpcError as exc:
                        refusals.append(exc)
                    if len(refusals) == 5:
                        break
            assert acknowledged and len(refusals) == 5
            assert {r.code() for r in refusals} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            assert {dict(r.trailing_metadata())["halfmq-error"] for r in refusals} == {"STORAGE_FULL"}
            refused = [r for r in caplog.records if "write refused" in r.getMessage()]
            assert len(refused) == 1 and not any(r.exc_info for r in caplog.records), "one line, no traceback"

            # Reads still work, over gRPC and HTTP; the HTTP write gets a JSON 507.
            pulled = sum(
                len(stub.Pull(pb.PullRequest(topic="orders", queue_id=q, offset=0, max_messages=1024)).messages)
                for q in range(4)
            )
            assert pulled == len(acknowledged)
            # As big as the refused sends: a message that fits in a page's free space needs no disk.
            full = httpx.post(f"{broker.http}/topics/orders/messages", json={"body": "x" * BODY})
            assert (full.status_code, full.json()["error"]["code"]) == (507, "STORAGE_FULL")

            # A transaction whose half message was stored, and whose commit met a full disk: the
            # SDK reports state None, and the broker's check commits it once space returns. The
            # log is emptied first; then the disk keeps room for the half message's 1 MiB in the
            # log but not for a checkpoint to copy it into the database file, so no checkpoint
            # can make room in the log for the commit's copy of it.
            filler.unlink()
            with contextlib.closing(sqlite3.connect(small_disk / "data" / DB_FILE)) as conn:
                wait_until(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0)
            body = bytes(1 << 20)
            fill(small_disk, leave=len(body) + (256 << 10))
            listener = FillsTheDisk(small_disk)
            with RocketMQTransactionProducer(
                group="g", broker=broker.address, listener=listener, timeout=3
            ) as producer:
                result = producer.send_message_in_transaction(Message(topic="orders", body=body, keys=["t-1"]))
                assert result.state is None
                (small_disk / "filler").unlink()
                clock.advance(2)
                assert broker.check_once().checked == 1
                wait_until(lambda: broker.broker.store.transaction(result.transaction_id).state
                           is TransactionState.COMMITTED)  # fmt: skip

            # Space is back: writes succeed, and every acknowledged message is there exactly once.
            send(10_000)
            acknowledged.append("m-10000")
    finally:
        broker.stop()
    stored = [row[0] for row in topic_rows(small_disk / "data", "orders")]
    assert sorted(stored) == sorted([*acknowledged, result.message_id])
