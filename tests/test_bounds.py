"""Every path has a bound, and going past it gets a typed refusal with no side effect (guarantee 11)."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest

from broker.config import load_settings
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from tests.processes import BrokerProcess
from tests.support import BrokerThread, broker_settings, store_snapshot, wait_until

MiB = 1 << 20
S = grpc.StatusCode


def stub_for(address: str) -> tuple[grpc.Channel, pb_grpc.BrokerStub]:
    channel = grpc.insecure_channel(
        address, options=[("grpc.max_send_message_length", 64 * MiB), ("grpc.max_receive_message_length", 64 * MiB)]
    )
    return channel, pb_grpc.BrokerStub(channel)


def test_a_pull_of_big_messages_stays_under_the_byte_budget_and_always_returns_one(broker):
    channel, stub = stub_for(broker.address)
    with channel:
        queue_messages = []
        n = 0
        while len(queue_messages) < 20:  # 20 messages of 4 MiB, all in queue 0
            message = pb.Message(topic="orders", body=os.urandom(4 * MiB - 4096), message_id=f"big-{n}")
            (result,) = stub.SendBatch(pb.SendBatchRequest(messages=[message])).results
            if result.queue_id == 0:
                queue_messages.append(result.queue_offset)
            n += 1
        offset, pulled = 0, []
        while offset < queue_messages[-1] + 1:
            reply = stub.Pull(pb.PullRequest(topic="orders", queue_id=0, offset=offset, max_messages=1024))
            assert reply.ByteSize() <= 16 * MiB + 64 * 1024
            assert len(reply.messages) >= 1
            pulled += [m.queue_offset for m in reply.messages]
            offset = reply.next_offset
    assert pulled == queue_messages


def test_properties_and_keys_are_limited_and_counted_with_the_body(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", max_body_bytes=1024))
    try:
        before = store_snapshot(tmp_path / "data")
        channel, stub = stub_for(broker.address)
        with channel:
            cases = {
                "properties too big": pb.Message(
                    topic="orders", body=b"x", message_id="p-1", properties={"k": "v" * (50 * MiB)}
                ),
                "too many properties": pb.Message(
                    topic="orders", body=b"x", message_id="p-2", properties={f"k{i}": "v" for i in range(200)}
                ),
                "body and properties over the limit": pb.Message(
                    topic="orders", body=b"x" * 1000, message_id="p-3", properties={"k": "v" * 100}
                ),
                "keys over the limit with the body": pb.Message(
                    topic="orders", body=b"x" * 1000, message_id="p-4", keys=["k" * 100]
                ),
                "a reserved property": pb.Message(
                    topic="orders", body=b"x", message_id="p-5", properties={"REAL_TOPIC": "other"}
                ),
            }
            refusals = ("MESSAGE_TOO_LARGE", "INVALID_ARGUMENT")
            for name, message in cases.items():
                with pytest.raises(grpc.RpcError) as refused:
                    stub.SendBatch(pb.SendBatchRequest(messages=[message]))
                assert refused.value.code() is S.INVALID_ARGUMENT, name
                assert dict(refused.value.trailing_metadata())["halfmq-error"] in refusals, name
                halves = pb.SendHalfMessagesRequest(
                    items=[pb.SendHalfMessageRequest(message=message, producer_group="g")]
                )
                (outcome,) = stub.SendHalfMessages(halves).outcomes
                assert outcome.WhichOneof("outcome") == "error" and outcome.error.code in refusals, name
        assert store_snapshot(tmp_path / "data") == before
    finally:
        broker.stop()


def test_a_committed_offset_beyond_the_queue_end_is_refused(broker):
    channel, stub = stub_for(broker.address)
    with channel:
        stub.SendBatch(pb.SendBatchRequest(messages=[pb.Message(topic="orders", body=b"x", message_id="m-1")]))
        before = store_snapshot(broker.broker.settings.data_dir)
        for offset in (2**63 - 1, 2):
            with pytest.raises(grpc.RpcError) as refused:
                stub.CommitConsumerOffset(
                    pb.CommitConsumerOffsetRequest(consumer_group="c", topic="orders", queue_id=0, offset=offset)
                )
            assert refused.value.code() is S.INVALID_ARGUMENT
        assert store_snapshot(broker.broker.settings.data_dir) == before


@pytest.mark.parametrize("client_id", ["has space", "x" * 300, "tab\there", "é"])
def test_a_session_with_a_malformed_client_id_is_refused(broker, client_id):
    with grpc.insecure_channel(broker.address) as channel:
        hello = pb.SessionUp(hello=pb.Hello(producer_group="g", client_id=client_id))
        call = pb_grpc.BrokerStub(channel).ProducerSession(iter([hello]), timeout=10)
        with pytest.raises(grpc.RpcError) as refused:
            next(call)
    assert refused.value.code() is S.INVALID_ARGUMENT
    assert broker.broker.registry.session_count() == 0


@pytest.mark.parametrize(
    ("argv", "env", "problem"),
    [
        (["--auth-token", ""], {}, "empty"),
        ([], {"HALFMQ_AUTH_TOKEN": ""}, "empty"),
        (["--max-body-bytes", str(64 * MiB)], {}, "transport"),
        (["--auth-token-file", "/nonexistent/token"], {}, "cannot read"),
        (["--auth-token", "t"], {"HALFMQ_AUTH_TOKEN_FILE": "/etc/hostname"}, "not both"),
        (["--advertised-address", "mq.example.internal"], {}, "HOST:PORT"),
        ([], {"HALFMQ_ADVERTISED_ADDRESS": "mq:99999"}, "HOST:PORT"),
    ],
)
def test_settings_that_cannot_work_are_refused_at_start_up(argv, env, problem, capsys):
    with pytest.raises(SystemExit):
        load_settings(argv, env)
    assert problem in capsys.readouterr().err


def test_the_token_can_come_from_a_file_such_as_a_mounted_secret(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    assert load_settings([], {"HALFMQ_AUTH_TOKEN_FILE": str(secret)}).auth_token == "s3cret"
    secret.write_text("\n")
    with pytest.raises(SystemExit):
        load_settings(["--auth-token-file", str(secret)], {})


def test_an_empty_token_refuses_to_start_the_broker(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "broker", "--data-dir", str(tmp_path / "data"), "--grpc-port", "0", "--http-port", "0"],
        env={**os.environ, "HALFMQ_AUTH_TOKEN": ""},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"empty" in done.stderr
    assert not (tmp_path / "data").exists(), "nothing was created"


@pytest.mark.parametrize(
    "flag", ["--grpc-port", "--http-port", "--rocketmq-port", "--kafka-port", "--namesrv-port", "--remoting-port",
             "--pull-port"]
)  # fmt: skip
def test_a_busy_port_stops_the_broker_naming_its_flag_before_anything_is_written(tmp_path, flag):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = str(holder.getsockname()[1])
        ports = {"--grpc-port": "0", "--http-port": "0", "--rocketmq-port": "0", "--kafka-port": "0",
                 "--namesrv-port": "0", "--remoting-port": "0", flag: busy}  # fmt: skip
        argv = [arg for pair in ports.items() for arg in pair]
        done = subprocess.run(
            [sys.executable, "-m", "broker", "--data-dir", str(tmp_path / "data"), *argv, "--pull-processes", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{flag} {busy}: the port is in use" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "data").exists(), "nothing was created"


def raw_http(port: int, head: str) -> bytes:
    """Send only the request head; return whatever the server answers before any body is sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer) < answer.find(b"\r\n\r\n") + 4 + 20:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def test_a_200_mb_post_without_a_token_is_refused_before_its_body_is_read(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret"))
    try:
        before = store_snapshot(tmp_path / "data")
        head = (
            "POST /topics/orders/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {200 * MiB}\r\n\r\n"
        )
        answer = raw_http(broker.broker.http_port, head)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert b'"UNAUTHENTICATED"' in answer
        authed = head.replace("Host: x\r\n", "Host: x\r\nAuthorization: Bearer s3cret\r\n")
        answer = raw_http(broker.broker.http_port, authed)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b'"BODY_TOO_LARGE"' in answer
        chunked = authed.replace(f"Content-Length: {200 * MiB}", "Transfer-Encoding: chunked")
        assert raw_http(broker.broker.http_port, chunked).startswith(b"HTTP/1.1 411")
        assert store_snapshot(tmp_path / "data") == before
        ok = httpx.post(
            f"{broker.http}/topics/orders/messages", json={"body": "fine"}, headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 201, ok.text
    finally:
        broker.stop()


def broker_with_file_limit(data_dir: Path, soft: int, hard: int) -> BrokerProcess:
    """A broker process started with the given open-file limits, as a shell's ulimit would set them."""
    process = BrokerProcess(data_dir)
    with process.log.open("ab") as log:
        process.process = subprocess.Popen(
            process._args,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)),
        )
    wait_until(lambda: b"broker ready" in process.log.read_bytes() or process.process.poll() is not None, timeout=30)
    assert process.process.poll() is None, process.log.read_text()
    return process


def test_the_broker_raises_its_open_file_limit_at_start_up(tmp_path):
    process = broker_with_file_limit(tmp_path / "data", 256, 4096)
    try:
        assert process.process is not None
        limits = Path(f"/proc/{process.process.pid}/limits").read_text()
        line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        assert line.split()[3] == "4096", line
    finally:
        process.stop()


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_many_half_open_http_connections_do_not_lock_out_grpc_or_http(tmp_path):
    process = broker_with_file_limit(tmp_path / "data", 1024, 1100)
    sockets = []
    try:
        for _ in range(1100):
            sockets.append(socket.create_connection(("127.0.0.1", process.http_port), timeout=10))
        began = time.monotonic()
        with grpc.insecure_channel(process.address) as channel:
            topics = pb_grpc.BrokerStub(channel).ListTopics(pb.ListTopicsRequest(), timeout=10)
        assert [t.name for t in topics.topics] == ["orders"]
        assert time.monotonic() - began < 10
        # The heads never came: the connections are closed, and the admin API answers again.
        wait_until(lambda: healthy(process.http_port), timeout=30)
    finally:
        for sock in sockets:
            sock.close()
        process.stop()
    assert process.log.stat().st_size < 1 * MiB, "accept errors are logged at a bounded rate"
