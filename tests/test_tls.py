"""TLS on all three ports (issue 11): the SDK, the Spark source, the CLI, curl and the official
RocketMQ 5 Python client succeed with the test CA; plaintext is refused; with a client CA, a
client without a certificate is refused (mutual TLS)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from broker.remoting.frame import Command, decode, encode
from broker.tls import TlsFiles
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import BrokerUnavailable, Message, Producer, PullConsumer, RocketMQTransactionProducer
from tests.processes import ROOT, consume, official
from tests.spark_support import batch_reader
from tests.support import BrokerThread, Pki, ScriptedListener, broker_settings


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


@pytest.fixture
def tls_broker(tmp_path: Path, pki: Pki) -> Iterator[BrokerThread]:
    broker = BrokerThread(broker_settings(tmp_path / "data", tls=TlsFiles(pki.server, pki.server)))
    yield broker
    broker.stop()


def https(broker: BrokerThread) -> str:
    return f"https://127.0.0.1:{broker.broker.http_port}"


def test_every_port_serves_tls_to_clients_that_trust_the_ca(tls_broker, pki):
    broker = tls_broker
    with RocketMQTransactionProducer(
        group="g", broker=broker.address, listener=ScriptedListener(), tls_ca=pki.ca
    ) as producer:
        sent = producer.send_message_in_transaction(Message(topic="orders", body=b"over-tls"))
    with PullConsumer(group="c", broker=broker.address, tls_ca=str(pki.ca)) as consumer:
        queue = next(q for q, (_, high) in consumer.queue_offsets("orders").items() if high)
        pulled = consumer.pull("orders", queue_id=queue, offset=0)
    assert [m.message_id for m in pulled.messages] == [sent.message_id]

    curl = subprocess.run(["curl", "-sS", "--cacert", str(pki.ca), f"{https(broker)}/healthz"], capture_output=True)
    assert curl.returncode == 0 and b'"status":"ok"' in curl.stdout
    cli = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", https(broker), "--ca", str(pki.ca), "topics", "list"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert cli.returncode == 0 and "orders" in cli.stdout, cli.stderr

    endpoint = f"127.0.0.1:{broker.broker.rocketmq_port}"
    env = {**os.environ, "RMQ_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki.ca)}
    out, _ = official(endpoint, "send", env).communicate(timeout=180)
    assert "SENT rmq-commit" in out
    got = [line.split()[1] for line in consume(endpoint, "rmq5", "drain", env) if line.startswith("GOT")]
    assert sorted(got) == sorted(["over-tls", "rmq-commit", "rmq-normal"])


def test_the_rocketmq_name_server_and_remoting_broker_speak_tls_with_the_broker_s_certificate(tls_broker, pki):
    context = ssl.create_default_context(cafile=str(pki.ca))
    for port, code, fields in ((tls_broker.broker.namesrv_port, 105, {"topic": "orders"}),
                               (tls_broker.broker.remoting_port, 14, {"consumerGroup": "g", "topic": "orders",
                                                                      "queueId": "0"})):  # fmt: skip
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(encode(Command(code=code, opaque=1, fields=fields)))
            size = int.from_bytes(tls.recv(4), "big")
            reply = b""
            while len(reply) < size:
                reply += tls.recv(size - len(reply))
        assert decode(reply).code in (0, 22)  # a route; an offset not found
        with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:  # plaintext gets no answer
            plain.sendall(encode(Command(code=code, opaque=1, fields=fields)))
            assert plain.recv(4) == b""


def test_plaintext_clients_are_refused_with_a_clear_error(tls_broker, pki):
    broker = tls_broker
    began = time.monotonic()
    with pytest.raises(BrokerUnavailable, match=r"within 2 s .*TLS setting \(tls_ca\)"):  # noqa: SIM117
        with Producer(broker=broker.address, timeout=2) as producer:
            producer.send(Message(topic="orders", body=b"plain"))
    assert time.monotonic() - began < 5
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{broker.broker.http_port}/healthz", timeout=5)
    for port in (broker.broker.grpc_port, broker.broker.rocketmq_port):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as refused:
            pb_grpc.BrokerStub(channel).ListTopics(pb.ListTopicsRequest(), timeout=2)
        assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    cli = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", https(broker), "topics", "list"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert cli.returncode == 2 and "CERTIFICATE_VERIFY_FAILED" in cli.stderr, "the system's CAs do not trust it"


def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path, pki):
    broker = BrokerThread(broker_settings(tmp_path / "data", tls=TlsFiles(pki.server, pki.server, pki.ca)))
    try:
        with pytest.raises(BrokerUnavailable):  # noqa: SIM117
            with PullConsumer(group="c", broker=broker.address, timeout=2, tls_ca=pki.ca) as consumer:
                consumer.queue_offsets("orders")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{https(broker)}/healthz", verify=ssl.create_default_context(cafile=pki.ca), timeout=5)
        for port in (broker.broker.grpc_port, broker.broker.rocketmq_port):
            credentials = grpc.ssl_channel_credentials(pki.ca.read_bytes())
            with grpc.secure_channel(f"127.0.0.1:{port}", credentials) as channel, pytest.raises(grpc.RpcError):
                pb_grpc.BrokerStub(channel).ListTopics(pb.ListTopicsRequest(), timeout=2)

        # With the client certificate, the same calls go through.
        pem = pki.client.read_bytes()
        credentials = grpc.ssl_channel_credentials(pki.ca.read_bytes(), private_key=pem, certificate_chain=pem)
        with grpc.secure_channel(broker.address, credentials) as channel:
            topics = pb_grpc.BrokerStub(channel).ListTopics(pb.ListTopicsRequest(), timeout=5).topics
        assert [t.name for t in topics] == ["orders"]
        context = ssl.create_default_context(cafile=pki.ca)
        context.load_cert_chain(pki.client)
        assert httpx.get(f"{https(broker)}/healthz", verify=context, timeout=5).json()["status"] == "ok"
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "{server}"], "needs both --tls-cert and --tls-key"),
        (["--tls-client-ca", "{ca}"], "needs both --tls-cert and --tls-key"),
        (["--tls-cert", "{server}", "--tls-key", "{ca}"], "cannot use the TLS files"),
        (["--tls-cert", "{missing}", "--tls-key", "{server}"], "cannot use the TLS files"),
    ],
)
def test_unusable_tls_settings_stop_the_broker_at_start_up(tmp_path, pki, args, message):
    files = {"server": pki.server, "ca": pki.ca, "missing": tmp_path / "missing.pem"}
    started = subprocess.run(
        [sys.executable, "-m", "broker", "--data-dir", str(tmp_path / "data"), *(a.format(**files) for a in args)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 2 and message in started.stderr


@pytest.mark.spark
def test_the_spark_source_and_sink_work_over_tls_with_tls_ca_file(spark, tls_broker, pki):
    with Producer(broker=tls_broker.address, tls_ca=pki.ca) as producer:
        producer.send_batch([Message(topic="orders", body=b"spark-%d" % i) for i in range(20)])
    rows = batch_reader(spark, tls_broker.address, tlsCaFile=str(pki.ca)).collect()
    assert sorted(row.body for row in rows) == sorted(b"spark-%d" % i for i in range(20))
    with pytest.raises(Exception, match="tlsCaFile"):
        batch_reader(spark, tls_broker.address, tlsCaFile=str(pki.ca.parent / "missing.pem")).collect()
    published = spark.range(5).selectExpr("concat('sunk-', cast(id as string)) as body")
    published.write.format("halfmq").option("broker", tls_broker.address).option("topic", "orders").option(
        "tlsCaFile", str(pki.ca)
    ).mode("append").save()
    rows = batch_reader(spark, tls_broker.address, tlsCaFile=str(pki.ca)).collect()
    assert sorted(row.body for row in rows if row.body.startswith(b"sunk-")) == [b"sunk-%d" % i for i in range(5)]
