"""Pull processes (issue 10): processes beside the broker serve Pull, PullColumns, ReadColumns and
GetQueueOffsets from the same file, answer exactly as the broker does, carry its token and TLS,
are restarted when killed, exit with a killed broker, and the Spark source reads through them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from broker.config import MAX_PULL_PROCESSES, load_settings
from broker.model import HALF_TOPIC, Topic
from broker.tls import TlsFiles
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import Message, Producer
from spark_consumer.options import SourceOptions
from spark_consumer.source import HalfmqBatchReader
from tests.processes import BrokerProcess
from tests.spark_support import batch_reader, run_available_now, stream_reader
from tests.support import BrokerThread, FakeClock, Pki, broker_settings, wait_until


@pytest.fixture
def pulled(tmp_path: Path) -> Iterator[BrokerThread]:
    """A broker with two pull processes."""
    broker = BrokerThread(broker_settings(tmp_path / "data", pull_processes=2))
    yield broker
    broker.stop()


def stub(address: str) -> pb_grpc.BrokerStub:
    return pb_grpc.BrokerStub(grpc.insecure_channel(address))


def pull_ports(broker: BrokerThread) -> list[int]:
    return list(stub(broker.address).GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders")).pull_ports)


def pull_pids(data_dir: Path) -> set[int]:
    """The pids of the pull processes serving ``data_dir``."""
    found = subprocess.run(
        ["pgrep", "-f", f"broker.pull_process --data-dir {data_dir} "], capture_output=True, text=True
    )
    return {int(pid) for pid in found.stdout.split()}


def answers(rpc: grpc.UnaryUnaryMultiCallable, request: object) -> object:
    """The reply, or the (status, details) of the refusal."""
    try:
        return rpc(request, timeout=10)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()


def streamed(rpc: grpc.UnaryStreamMultiCallable, request: object) -> object:
    """The replies of a streamed call, or the (status, details) that ended it."""
    try:
        return list(rpc(request, timeout=10))
    except grpc.RpcError as exc:
        return exc.code(), exc.details()


def test_pull_processes_answer_exactly_as_the_broker_does(pulled):
    with Producer(broker=pulled.address) as producer:
        producer.send_batch(
            [Message(topic="orders", body=b"") , Message(topic="orders", body="żółw 🐢".encode(), keys=["k-1", "ключ"],
             tags="t", properties={"a": "1", "ünï": "çødé"})]
            + [Message(topic="orders", body=bytes([i]) * (i * 997)) for i in range(60)]
        )  # fmt: skip
    main = stub(pulled.address)
    ports = pull_ports(pulled)
    assert len(set(ports)) == 2 and pulled.broker.grpc_port not in ports
    for port in ports:
        other = stub(f"127.0.0.1:{port}")
        request = pb.GetQueueOffsetsRequest(topic="orders")
        assert other.GetQueueOffsets(request).queues == main.GetQueueOffsets(request).queues
        assert list(other.GetQueueOffsets(request).pull_ports) == []  # only the broker knows them all
        for queue_id in range(4):
            for offset, limit in ((0, 1), (0, 1024), (3, 5), (10, 7), (1000, 1)):
                request = pb.PullRequest(topic="orders", queue_id=queue_id, offset=offset, max_messages=limit)
                assert other.Pull(request) == main.Pull(request)
                assert other.PullColumns(request) == main.PullColumns(request)
                read = pb.ReadColumnsRequest(topic="orders", queue_id=queue_id, offset=offset, end=offset + 9,
                                             max_messages=limit)  # fmt: skip
                assert streamed(other.ReadColumns, read) == streamed(main.ReadColumns, read)


def test_a_pull_process_sees_each_acknowledged_write_and_each_topic_created_since(pulled):
    main, other = stub(pulled.address), stub(f"127.0.0.1:{pull_ports(pulled)[0]}")
    assert len(other.GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders")).queues) == 4  # topics read now
    main.CreateTopic(pb.CreateTopicRequest(topic=pb.Topic(name="later", queues=2)))
    with Producer(broker=pulled.address) as producer:
        for i in range(30):
            sent = producer.send(Message(topic="later", body=b"m-%d" % i))
            request = pb.PullRequest(topic="later", queue_id=sent.queue_id, offset=sent.queue_offset, max_messages=1)
            assert [m.message_id for m in other.Pull(request).messages] == [sent.message_id]


@pytest.mark.parametrize(
    "request_",
    [
        pb.PullRequest(topic="missing", queue_id=0, offset=0, max_messages=1),
        pb.PullRequest(topic=HALF_TOPIC, queue_id=0, offset=0, max_messages=1),
        pb.PullRequest(topic="orders", queue_id=9, offset=0, max_messages=1),
        pb.PullRequest(topic="orders", queue_id=0, offset=-1, max_messages=1),
        pb.PullRequest(topic="orders", queue_id=0, offset=0, max_messages=0),
        pb.PullRequest(topic="orders", queue_id=0, offset=0, max_messages=1025),
        pb.PullRequest(topic="bad name!", queue_id=0, offset=0, max_messages=1),
    ],
)
def test_a_pull_process_refuses_what_the_broker_refuses_with_the_same_status(pulled, request_):
    main, other = stub(pulled.address), stub(f"127.0.0.1:{pull_ports(pulled)[1]}")
    refused = answers(main.PullColumns, request_)
    assert isinstance(refused, tuple) and refused[0] != grpc.StatusCode.OK
    assert answers(other.PullColumns, request_) == refused
    assert answers(other.Pull, request_) == answers(main.Pull, request_)
    read = pb.ReadColumnsRequest(topic=request_.topic, queue_id=request_.queue_id, offset=request_.offset,
                                 end=request_.offset + 5, max_messages=request_.max_messages)  # fmt: skip
    assert streamed(other.ReadColumns, read) == streamed(main.ReadColumns, read) == refused


def test_a_pull_process_answers_as_the_broker_does_after_retention_deleted_messages(tmp_path):
    clock = FakeClock()
    settings = broker_settings(tmp_path / "data", topics=(Topic("orders", 1),), retention=60, pull_processes=1)
    broker = BrokerThread(settings, clock)
    try:
        main = stub(broker.address)
        other = stub(f"127.0.0.1:{pull_ports(broker)[0]}")
        with Producer(broker=broker.address) as producer:
            producer.send_batch([Message(topic="orders", body=b"old-%d" % i) for i in range(10)])
            clock.advance(61)
            assert broker.run(broker.broker.retention.sweep()).messages == 10
            request = pb.GetQueueOffsetsRequest(topic="orders")
            (emptied,) = main.GetQueueOffsets(request).queues
            assert (emptied.min_offset, emptied.max_offset) == (10, 10)  # the queue's floor, from queue_floors
            assert list(other.GetQueueOffsets(request).queues) == [emptied]
            producer.send_batch([Message(topic="orders", body=b"new-%d" % i) for i in range(3)])
        for offset in (0, 9, 10, 12, 13):
            request = pb.PullRequest(topic="orders", queue_id=0, offset=offset, max_messages=5)
            assert answers(other.Pull, request) == answers(main.Pull, request)
            assert answers(other.PullColumns, request) == answers(main.PullColumns, request)
            read = pb.ReadColumnsRequest(topic="orders", queue_id=0, offset=offset, end=20, max_messages=2)
            assert streamed(other.ReadColumns, read) == streamed(main.ReadColumns, read)
        code, _ = answers(other.PullColumns, pb.PullRequest(topic="orders", queue_id=0, offset=0, max_messages=5))
        assert code == grpc.StatusCode.OUT_OF_RANGE
    finally:
        broker.stop()


def test_a_pull_process_serves_nothing_but_pulls(pulled):
    other = stub(f"127.0.0.1:{pull_ports(pulled)[0]}")
    request = pb.SendBatchRequest(messages=[pb.Message(topic="orders", body=b"x", message_id="m-1")])
    code, _ = answers(other.SendBatch, request)  # type: ignore[misc]
    assert code == grpc.StatusCode.UNIMPLEMENTED


def test_pull_processes_require_the_brokers_token(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", pull_processes=1, auth_token="s3cret"))
    try:
        token = (("authorization", "Bearer s3cret"),)
        main = stub(broker.address)
        (port,) = main.GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders"), metadata=token).pull_ports
        other = stub(f"127.0.0.1:{port}")
        request = pb.GetQueueOffsetsRequest(topic="orders")
        with pytest.raises(grpc.RpcError) as refused:
            other.GetQueueOffsets(request, timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as wrong:
            other.GetQueueOffsets(request, timeout=10, metadata=(("authorization", "Bearer nope"),))
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert len(other.GetQueueOffsets(request, timeout=10, metadata=token).queues) == 4
    finally:
        broker.stop()


def test_pull_processes_serve_the_brokers_tls(tmp_path):
    pki = Pki(tmp_path / "pki")
    broker = BrokerThread(broker_settings(tmp_path / "data", pull_processes=1, tls=TlsFiles(pki.server, pki.server)))
    try:
        credentials = grpc.ssl_channel_credentials(pki.ca.read_bytes())
        main = pb_grpc.BrokerStub(grpc.secure_channel(broker.address, credentials))
        (port,) = main.GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders")).pull_ports
        secure = pb_grpc.BrokerStub(grpc.secure_channel(f"127.0.0.1:{port}", credentials))
        assert len(secure.GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders"), timeout=10).queues) == 4
        with pytest.raises(grpc.RpcError) as plaintext:
            stub(f"127.0.0.1:{port}").GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders"), timeout=5)
        assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        broker.stop()


def test_a_killed_pull_process_is_restarted_on_its_port(pulled, tmp_path):
    ports = pull_ports(pulled)
    before = pull_pids(tmp_path / "data")
    assert len(before) == 2
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(pull_pids(tmp_path / "data") - before) == 1, timeout=30, interval=0.1)
    assert victim not in pull_pids(tmp_path / "data")
    for port in ports:  # the new process may still be starting: wait for it as the Spark source does
        offsets = stub(f"127.0.0.1:{port}").GetQueueOffsets
        assert len(offsets(pb.GetQueueOffsetsRequest(topic="orders"), timeout=30, wait_for_ready=True).queues) == 4
    assert pull_ports(pulled) == ports
    assert restarts(pulled) == 1


def test_a_pull_process_whose_port_is_taken_meanwhile_is_restarted_once_it_is_free(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", pull_processes=1))
    try:
        (port,) = pull_ports(broker)
        (victim,) = pull_pids(tmp_path / "data")
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: not listening(port), timeout=10)
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            taken.bind(("127.0.0.1", port))  # before the broker's restart, RESTART_DELAY after the exit
            taken.listen()
            time.sleep(3)  # a few restarts, each refused the port
            assert restarts(broker) == 0
            assert broker.broker.pull_processes.ports == [port]
        offsets = stub(f"127.0.0.1:{port}").GetQueueOffsets
        assert len(offsets(pb.GetQueueOffsetsRequest(topic="orders"), timeout=30, wait_for_ready=True).queues) == 4
        wait_until(lambda: restarts(broker) == 1, timeout=10)
    finally:
        broker.stop()


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def restarts(broker: BrokerThread) -> float:
    """halfmq_pull_process_restarts_total, as the broker's /metrics says it."""
    lines = httpx.get(f"{broker.http}/metrics").text.splitlines()
    return float(next(line for line in lines if line.startswith("halfmq_pull_process_restarts_total")).split()[1])


def test_pull_processes_exit_when_the_broker_is_killed(tmp_path):
    broker = BrokerProcess(tmp_path / "data", "--pull-processes", "2")
    broker.start()
    try:
        wait_until(lambda: len(pull_pids(tmp_path / "data")) == 2, timeout=30, interval=0.1)
    finally:
        broker.kill()
    wait_until(lambda: not pull_pids(tmp_path / "data"), timeout=15, interval=0.1)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pull-processes", str(MAX_PULL_PROCESSES + 1)], f"at most {MAX_PULL_PROCESSES}"),
        (["--pull-processes", "-1"], "must be >= 0"),
        (["--pull-processes", "2", "--pull-port", "65535"], "no room for 2 pull processes"),
    ],
)
def test_bad_pull_process_settings_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        load_settings(argv, {})
    assert message in capsys.readouterr().err


@pytest.mark.spark
def test_the_spark_source_reads_through_the_pull_processes_in_batch_and_streaming_queries(spark, pulled):
    with Producer(broker=pulled.address) as producer:
        producer.send_batch([Message(topic="orders", body=b"spark-%d" % i) for i in range(200)])
    options = SourceOptions.parse({"broker": pulled.address, "topics": "orders"}, streaming=False)
    planned = {part.connection.broker for part in HalfmqBatchReader(options).partitions()}
    assert planned == {f"127.0.0.1:{port}" for port in pull_ports(pulled)}
    rows = batch_reader(spark, pulled.address).collect()
    assert sorted(row.body for row in rows) == sorted(b"spark-%d" % i for i in range(200))
    streamed = run_available_now(stream_reader(spark, pulled.address, startingOffsets="earliest"))
    assert sorted(row.body for _, batch in streamed for row in batch) == sorted(row.body for row in rows)
