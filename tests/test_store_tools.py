"""Offline store tools (issue 11, point 2) and the data directory's lock: ``halfmq store inspect``
and ``export`` read a real store, beside a running broker too; ``compact`` refuses while a broker
holds the directory; a second broker on the same directory is refused."""

from __future__ import annotations

import base64
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from broker.errors import StoreInUse
from broker.store import Store
from broker.store.base import bytes_on_disk, file_size
from broker.store.schema import VERSION
from producer_sdk import Message, Producer, PullConsumer
from tests.processes import BrokerProcess
from tests.support import store_snapshot, wait_until


def halfmq_store(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "halfmq_cli", "store", *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.fixture
def running(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "data")  # with topic orders, 4 queues
    broker.start()
    with Producer(broker=broker.address) as producer:
        producer.send(Message(topic="orders", body=b"\x00\xffbinary", message_id="m-1", keys=("k1", "kü"),
                              tags="t", properties={"a": "b"}))  # fmt: skip
        for i in range(2, 8):
            producer.send(Message(topic="orders", body=f"body {i}".encode(), message_id=f"m-{i}"))
    yield broker
    broker.stop()


def pulled(broker: BrokerProcess) -> list[dict[str, object]]:
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        return [
            {
                "queue_id": m.queue_id,
                "queue_offset": m.queue_offset,
                "message_id": m.message_id,
                "keys": list(m.keys),
                "tags": m.tags,
                "properties": dict(m.properties),
                "body_base64": base64.b64encode(m.body).decode(),
                "born_timestamp": m.born_timestamp,
                "store_timestamp": m.store_timestamp,
            }
            for q in range(4)
            for m in consumer.pull("orders", queue_id=q, offset=0).messages
        ]


def test_inspect_and_export_read_a_store_beside_its_running_broker_and_change_nothing(running):
    data = running.data_dir
    expected = pulled(running)
    before = store_snapshot(data)
    # The broker writes nothing now: it copies its logs into the databases and empties them.
    wait_until(lambda: not file_size(data / "halfmq.db-wal") and not file_size(data / "segments.db-wal"))
    inspected = halfmq_store("inspect", str(data))
    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    assert report["schema_version"] == VERSION
    assert report["tables"]["messages"] == 7 and report["tables"]["topics"] >= 4
    assert report["wal_bytes"] == 0
    assert report["file_bytes"] == bytes_on_disk(data) == sum(f.stat().st_size for f in data.iterdir())

    jsonl = halfmq_store("export", str(data), "--topic", "orders")
    assert jsonl.returncode == 0, jsonl.stderr
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == expected

    as_csv = halfmq_store("export", str(data), "--topic", "orders", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [
        {
            **r,
            "queue_id": int(r["queue_id"]),
            "queue_offset": int(r["queue_offset"]),
            "keys": json.loads(r["keys"]),
            "properties": json.loads(r["properties"]),
            "born_timestamp": int(r["born_timestamp"]),
            "store_timestamp": int(r["store_timestamp"]),
        }
        for r in rows
    ] == expected
    assert store_snapshot(data) == before

    hidden = halfmq_store("export", str(data), "--topic", "RMQ_SYS_TRANS_HALF_TOPIC")
    missing = halfmq_store("export", str(data), "--topic", "nope")
    assert (hidden.returncode, missing.returncode) == (1, 1)
    assert "hidden" in hidden.stderr and "does not exist" in missing.stderr


def test_an_export_into_a_closed_pipe_ends_quietly(running):
    with Producer(broker=running.address) as producer:  # more than a pipe's buffer holds
        producer.send_batch([Message(topic="orders", body=bytes(1000), message_id=f"big-{i}") for i in range(500)])
    exporting = subprocess.Popen(
        [sys.executable, "-m", "halfmq_cli", "store", "export", str(running.data_dir), "--topic", "orders"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert exporting.stdout is not None and exporting.stdout.readline()  # ``| head -1``: one line read, then closed
    exporting.stdout.close()
    _, errors = exporting.communicate(timeout=60)
    assert errors == b"" and exporting.returncode == 1


def test_compact_refuses_while_a_broker_runs_and_keeps_every_message_after(running):
    data = running.data_dir
    refused = halfmq_store("compact", str(data))
    assert refused.returncode == 1 and "in use" in refused.stderr
    expected = pulled(running)
    running.stop()
    before = store_snapshot(data)
    done = halfmq_store("compact", str(data))
    assert done.returncode == 0, done.stderr
    sizes = json.loads(done.stdout)
    assert sizes["bytes_after"] <= sizes["bytes_before"]
    assert store_snapshot(data) == before
    running.start()
    assert pulled(running) == expected


def test_a_second_process_cannot_open_a_data_directory_in_use(running, tmp_path):
    with pytest.raises(StoreInUse):
        Store(running.data_dir)
    second = subprocess.run(
        [sys.executable, "-m", "broker", "--data-dir", str(running.data_dir), "--grpc-port", "0", "--http-port", "0",
         "--rocketmq-port", "0", "--kafka-port", "0", "--namesrv-port", "0", "--remoting-port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2 and "in use" in second.stderr
