"""The broker as a real container: Dockerfile lint, then build and run it with podman (issue 4).

The image is built on a local base image made by scripts/container-base.sh (no registry); the
container keeps its store in a named volume and is reached from the host through the SDK.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from halfmq_testing import free_port
from producer_sdk import LocalTransactionState, Message, PullConsumer, RocketMQTransactionProducer
from spark_consumer.client import BrokerClient, Connection
from tests.docs_runner import blocks
from tests.processes import consume, official
from tests.support import Pki, ScriptedListener, wait_until

ROOT = Path(__file__).resolve().parent.parent


def test_the_dockerfile_is_lint_clean():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def podman_env() -> dict[str, str]:
    """Build (or reuse) the local base image; skip only if podman cannot be installed here."""
    result = subprocess.run(["bash", str(ROOT / "scripts" / "container-base.sh")], capture_output=True, text=True)
    if result.returncode != 0:
        if shutil.which("podman") is None:
            pytest.skip(f"podman could not be installed: {result.stderr[-500:]}")
        raise AssertionError(f"container-base.sh failed: {result.stderr[-2000:]}")
    env = dict(os.environ)
    for assignment in result.stdout.split("export", 1)[1].split():
        key, _, value = assignment.partition("=")
        env[key] = value
    return env


def podman(env: dict[str, str], *args: str, timeout: float = 900) -> str:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, env=env, timeout=timeout)
    assert result.returncode == 0, f"podman {' '.join(args)}: {result.stderr[-3000:]}"
    return result.stdout.strip()


@pytest.fixture(scope="module")
def image() -> Iterator[tuple[dict[str, str], str]]:
    env = podman_env()
    tag = f"localhost/halfmq:test-{uuid.uuid4().hex[:8]}"
    # Docker format: OCI images cannot carry a HEALTHCHECK.
    podman(
        env,
        "build",
        "--format",
        "docker",
        "--build-arg",
        f"BASE_IMAGE={env['HALFMQ_BASE_IMAGE']}",
        "-t",
        tag,
        str(ROOT),
    )
    yield env, tag
    subprocess.run(["podman", "rmi", "-f", tag], env=env, capture_output=True)


@pytest.mark.e2e
@pytest.mark.slow
def test_the_container_keeps_committed_messages_across_a_restart(image, tmp_path):
    """The token and the TLS files come from mounted secrets; every port serves TLS; native and
    official RocketMQ 5 clients both work."""
    env, tag = image
    grpc_port, http_port, rocketmq_port, pull_port = free_port(), free_port(), free_port(), free_port()
    kafka_port = free_port()
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    pki = Pki(tmp_path / "tls")
    volume, name = f"halfmq-test-{uuid.uuid4().hex[:8]}", f"halfmq-test-{uuid.uuid4().hex[:8]}"
    podman(env, "volume", "create", volume)
    try:
        podman(
            env, "run", "-d", "--name", name, "--network", "host", "-v", f"{volume}:/data",
            # Host networking shares the host's interfaces: bind loopback only.
            "-e", "HALFMQ_HOST=127.0.0.1", "-e", f"HALFMQ_GRPC_PORT={grpc_port}", "-e", f"HALFMQ_HTTP_PORT={http_port}",
            "-e", f"HALFMQ_ROCKETMQ_PORT={rocketmq_port}", "-e", f"HALFMQ_KAFKA_PORT={kafka_port}",
            "-v", f"{secret}:/run/secrets/halfmq-token:ro,Z",
            "-e", "HALFMQ_AUTH_TOKEN_FILE=/run/secrets/halfmq-token", "-v", f"{pki.server}:/run/secrets/tls.pem:ro,Z",
            "-e", "HALFMQ_TLS_CERT=/run/secrets/tls.pem", "-e", "HALFMQ_TLS_KEY=/run/secrets/tls.pem",
            "-e", "HALFMQ_TOPICS=orders:4", "-e", "HALFMQ_CHECK_INTERVAL=0.5", "-e", "HALFMQ_TRANSACTION_TIMEOUT=1",
            "-e", "HALFMQ_PULL_PROCESSES=1", "-e", f"HALFMQ_PULL_PORT={pull_port}",
            tag,
        )  # fmt: skip
        http = f"https://127.0.0.1:{http_port}"
        trusted = ssl.create_default_context(cafile=pki.ca)
        healthy = lambda: httpx.get(f"{http}/healthz", timeout=2, verify=trusted).status_code == 200  # noqa: E731
        wait_until(lambda: _safely(healthy), 60)
        podman(env, "healthcheck", "run", name)
        assert podman(env, "exec", name, "id", "-u") == "10001"

        listener = ScriptedListener("UNKNOWN")
        outcomes = {"c1": "COMMIT", "c2": "COMMIT", "r1": "ROLLBACK", "later": "UNKNOWN"}
        for key, outcome in outcomes.items():
            listener.outcomes[key] = LocalTransactionState[outcome]
        address = f"127.0.0.1:{grpc_port}"
        with RocketMQTransactionProducer(
            group="g", broker=address, listener=listener, token="s3cret", tls_ca=pki.ca
        ) as producer:
            for key in outcomes:
                producer.send_message_in_transaction(Message(topic="orders", body=key.encode(), keys=[key]))
            listener.outcomes["later"] = LocalTransactionState.COMMIT  # the check-back will find it committed
            wait_until(lambda: httpx.get(f"{http}/healthz", verify=trusted).json()["pending_half_messages"] == 0, 30)
        assert listener.checked, "the broker in the container checked back with the host's producer"

        podman(env, "restart", name)
        wait_until(lambda: _safely(healthy), 60)
        with BrokerClient(Connection(address, pki.ca.read_bytes(), "s3cret")) as client:
            assert [reader.broker for reader in client.readers("orders")] == [f"127.0.0.1:{pull_port}"]
        for port in (grpc_port, pull_port):  # the broker, and its pull process with the same TLS and token
            with PullConsumer(group="audit", broker=f"127.0.0.1:{port}", token="s3cret", tls_ca=pki.ca) as consumer:
                bodies = sorted(
                    m.body
                    for q in consumer.queue_offsets("orders")
                    for m in consumer.pull("orders", queue_id=q, offset=0).messages
                )
            assert bodies == [b"c1", b"c2", b"later"]

        # The official RocketMQ 5 client, over TLS, signing with the token: commit, rollback, normal, receive.
        client_env = {**os.environ, "HOME": str(tmp_path / "home"), "RMQ_SK": "s3cret", "RMQ_TLS": "1",
                      "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki.ca)}  # fmt: skip
        endpoint = f"127.0.0.1:{rocketmq_port}"
        sent, _ = official(endpoint, "send", client_env).communicate(timeout=180)
        assert "SENT rmq-normal" in sent
        got = sorted(
            line.split()[1] for line in consume(endpoint, "rmq5", "drain", client_env) if line.startswith("GOT")
        )
        assert got == ["c1", "c2", "later", "rmq-commit", "rmq-normal"]
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=env, capture_output=True)
        subprocess.run(["podman", "volume", "rm", "-f", volume], env=env, capture_output=True)


@pytest.mark.e2e
@pytest.mark.slow
def test_a_kafka_client_reaches_the_container_through_a_remapped_port(image):
    """docs/operating.md's recipe, run as written with the built image: the Kafka port published
    on a free host port and advertised as it; confluent-kafka produces and consumes through it."""
    from confluent_kafka import Consumer, KafkaException, Producer

    env, tag = image
    recipe = next(b for b in blocks(ROOT / "docs" / "operating.md") if "HALFMQ_KAFKA_ADVERTISED_ADDRESS" in b.code)
    assert recipe.code.rstrip().endswith('"bootstrap.servers=127.0.0.1:$port"')
    name = re.search(r"--name (\S+)", recipe.code).group(1)
    script = recipe.code.replace(" halfmq\n", f" {tag}\n")
    try:
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, env=env)
        assert ran.returncode == 0, ran.stderr
        bootstrap = ran.stdout.strip().splitlines()[-1].removeprefix("bootstrap.servers=")
        assert not bootstrap.endswith(":9092"), "the recipe publishes the Kafka port on another host port"
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

        def started() -> bool:
            try:
                return producer.list_topics("orders", timeout=2).topics["orders"].error is None
            except KafkaException:
                return False

        wait_until(started, 60)
        for n in range(10):
            producer.produce("orders", key=f"k{n}".encode(), value=f"v{n}".encode(), partition=n % 4)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "remapped", "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            got += [(m.key(), m.value()) for m in consumer.consume(10, 1) if not m.error()]
        consumer.close()
        assert sorted(got) == sorted((f"k{n}".encode(), f"v{n}".encode()) for n in range(10))
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=env, capture_output=True)


def _safely(check) -> bool:
    try:
        return bool(check())
    except httpx.HTTPError:
        return False
