"""The official RocketMQ 5 Python client against halfmq's apache.rocketmq.v2 front end (issue 5).

The client runs unmodified in subprocesses (its own logs under a private HOME).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import grpc
import httpx
import pytest

from producer_sdk import Message, Producer, PullConsumer, RocketMQTransactionProducer
from tests.processes import BrokerProcess, consume, official
from tests.spark_support import batch_reader
from tests.support import (
    BrokerThread,
    PortForwarder,
    ScriptedListener,
    broker_settings,
    npm_install,
    store_snapshot,
    topic_rows,
    wait_until,
)

pytest.importorskip("rocketmq", reason="the rocketmq extra (official RocketMQ 5 Python client) is not installed")
pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def compat(tmp_path):
    broker = BrokerThread(
        broker_settings(tmp_path / "data", check_interval=0.3, transaction_timeout=1.0, check_timeout=1.0)
    )
    yield broker, f"127.0.0.1:{broker.broker.rocketmq_port}", {**os.environ, "HOME": str(tmp_path / "home")}
    broker.stop()


def readable(broker) -> list[bytes]:
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        return sorted(
            m.body
            for q in consumer.queue_offsets("orders")
            for m in consumer.pull("orders", queue_id=q, offset=0).messages
        )


def test_the_official_producer_commits_rolls_back_and_sends_normal_messages(compat):
    broker, endpoint, env = compat
    producer = official(endpoint, "send", env)
    out, _ = producer.communicate(timeout=120)
    assert producer.returncode == 0, out
    sent = {line.split()[1]: line.split()[2:] for line in out.splitlines() if line.startswith("SENT")}
    assert set(sent) == {"rmq-commit", "rmq-rollback", "rmq-normal"}
    assert readable(broker) == [b"rmq-commit", b"rmq-normal"]
    sent_async, _ = official(endpoint, "async", env).communicate(timeout=120)
    assert sent_async.startswith("SENT rmq-async ")
    assert readable(broker) == [b"rmq-async", b"rmq-commit", b"rmq-normal"]
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        committed = next(
            m
            for q in range(4)
            for m in consumer.pull("orders", queue_id=q, offset=0).messages
            if m.body == b"rmq-commit"
        )
    message_id, transaction_id = sent["rmq-commit"]
    assert committed.message_id == message_id == transaction_id, "RocketMQ names a transaction by its message id"
    assert committed.transaction_id, "native readers see the broker's own transaction id"
    assert (committed.tags, committed.keys) == ("rmq", ("rmq-commit",))
    # an operator finds each by the id the client was given and by its key; the rolled back one held
    for key, state in (("rmq-commit", "STORED"), ("rmq-rollback", "ROLLED_BACK"), ("rmq-normal", "STORED")):
        (found,) = httpx.get(f"{broker.http}/messages/{sent[key][0]}").json()
        assert (found["state"], found["keys"]) == (state, [key])
        assert httpx.get(f"{broker.http}/messages", params={"key": key}).json() == [found]


def test_a_killed_producers_orphaned_transaction_is_committed_once_by_another_producer_of_the_topic(compat):
    broker, endpoint, env = compat
    orphan = official(endpoint, "orphan", env)
    try:
        assert orphan.stdout is not None and orphan.stdout.readline().strip() == "ORPHANED"
    finally:
        os.kill(orphan.pid, signal.SIGKILL)
        orphan.wait()
    checker = official(endpoint, "checker", env, stdin=subprocess.PIPE)
    try:
        assert checker.stdout is not None and checker.stdout.readline().strip() == "CHECKER READY"
        wait_until(lambda: [r[3] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == [b"rmq-orphan"], 60)
    finally:
        assert checker.stdin is not None
        checker.stdin.close()
        out = checker.stdout.read() if checker.stdout else ""
        checker.wait(60)
    assert "CHECKED rmq-orphan" in out
    assert readable(broker) == [b"rmq-orphan"]
    assert broker.broker.store.pending_count() == 0


def test_routes_answer_with_typed_statuses_and_unsupported_rpcs_are_unimplemented(compat):
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker, endpoint, _ = compat
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        route = stub.QueryRoute(service.QueryRouteRequest(topic=definition.Resource(name="orders")))
        assert route.status.code == definition.OK
        assert [q.id for q in route.message_queues] == [0, 1, 2, 3]
        queue = route.message_queues[0]
        assert (queue.permission, list(queue.accept_message_types)) == (
            definition.READ_WRITE,
            [definition.NORMAL, definition.FIFO, definition.DELAY, definition.TRANSACTION],
        )
        assert queue.broker.endpoints.addresses[0].port == broker.broker.rocketmq_port
        for topic, code in (
            ("nope", definition.TOPIC_NOT_FOUND),
            ("RMQ_SYS_TRANS_HALF_TOPIC", definition.ILLEGAL_TOPIC),
        ):
            refused = stub.QueryRoute(service.QueryRouteRequest(topic=definition.Resource(name=topic)))
            assert refused.status.code == code and refused.status.message
        with pytest.raises(grpc.RpcError) as unimplemented:
            stub.SyncLiteSubscription(service.SyncLiteSubscriptionRequest())
        assert unimplemented.value.code() is grpc.StatusCode.UNIMPLEMENTED


def test_the_pull_rpcs_read_queues_and_keep_group_offsets_as_the_native_protocol_does(compat):
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker, endpoint, _ = compat
    with Producer(broker=broker.address) as producer:
        sent = [producer.send(Message(topic="orders", body=f"p{n}".encode(), tags="a" if n % 2 else "b",
                                      message_id=f"pull-{n}")) for n in range(8)]  # fmt: skip
    queue_id = sent[0].queue_id
    mine = [r for r in sent if r.queue_id == queue_id]
    queue = definition.MessageQueue(topic=definition.Resource(name="orders"), id=queue_id)
    group = definition.Resource(name="pullers")
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        replies = list(stub.PullMessage(service.PullMessageRequest(group=group, message_queue=queue, offset=0,
                                                                   batch_size=32)))  # fmt: skip
        assert replies[0].status.code == definition.OK
        assert [r.message.system_properties.message_id for r in replies if r.HasField("message")] == [
            r.message_id for r in mine
        ]
        assert replies[-1].next_offset == len(mine)
        filtered = list(stub.PullMessage(service.PullMessageRequest(
            group=group, message_queue=queue, offset=0, batch_size=32,
            filter_expression=definition.FilterExpression(type=definition.TAG, expression="a"),
        )))  # fmt: skip
        assert all(r.message.system_properties.tag == "a" for r in filtered if r.HasField("message"))
        assert filtered[-1].next_offset == len(mine), "the filtered ones are passed over"

        def by_sql(expression):
            return list(stub.PullMessage(service.PullMessageRequest(
                group=group, message_queue=queue, offset=0, batch_size=32,
                filter_expression=definition.FilterExpression(type=definition.SQL, expression=expression),
            )))  # fmt: skip

        tagged_b = by_sql("TAGS = 'b' OR TAGS IS NULL")
        assert [r.message.system_properties.tag for r in tagged_b if r.HasField("message")] == [
            "b" for r in mine if int(r.message_id.removeprefix("pull-")) % 2 == 0
        ]
        assert tagged_b[-1].next_offset == len(mine)
        (bad,) = by_sql("TAGS > 'b'")
        assert (bad.status.code, bad.status.message) == (
            definition.ILLEGAL_FILTER_EXPRESSION,
            "'b' cannot be compared by order (>, >=, <, <=, BETWEEN)",
        )
        at_end = service.PullMessageRequest(group=group, message_queue=queue, offset=len(mine),
                                            long_polling_timeout={"nanos": 300_000_000})  # fmt: skip
        empty = list(stub.PullMessage(at_end))
        assert (empty[0].status.code, empty[-1].next_offset) == (definition.MESSAGE_NOT_FOUND, len(mine))

        def query(policy, **fields):
            return stub.QueryOffset(service.QueryOffsetRequest(message_queue=queue, query_offset_policy=policy,
                                                               **fields))  # fmt: skip

        assert (query(definition.BEGINNING).offset, query(definition.END).offset) == (0, len(mine))
        assert query(definition.TIMESTAMP, timestamp={"seconds": 0}).offset == 0
        assert query(definition.TIMESTAMP, timestamp={"seconds": 4_000_000_000}).offset == len(mine)
        missing = stub.GetOffset(service.GetOffsetRequest(group=group, message_queue=queue))
        assert missing.status.code == definition.OFFSET_NOT_FOUND
        updated = stub.UpdateOffset(service.UpdateOffsetRequest(group=group, message_queue=queue, offset=2))
        assert updated.status.code == definition.OK
        assert stub.GetOffset(service.GetOffsetRequest(group=group, message_queue=queue)).offset == 2
        before = store_snapshot(broker.broker.settings.data_dir)
        beyond = stub.UpdateOffset(service.UpdateOffsetRequest(group=group, message_queue=queue, offset=10**6))
        assert (
            beyond.status.code == definition.BAD_REQUEST and store_snapshot(broker.broker.settings.data_dir) == before
        )
    with PullConsumer(group="pullers", broker=broker.address) as consumer:
        assert consumer.committed_offsets("orders")[queue_id] == 2, "the same committed offsets as the native ones"


def test_a_client_reaching_the_broker_through_a_remapped_port_is_routed_back_through_it(compat):
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker, _, env = compat
    forwarder = PortForwarder(("127.0.0.1", broker.broker.rocketmq_port))
    host, port = forwarder.address.split(":")
    with grpc.insecure_channel(forwarder.address) as channel:
        route = service_grpc.MessagingServiceStub(channel).QueryRoute(
            service.QueryRouteRequest(
                topic=definition.Resource(name="orders"),
                endpoints=definition.Endpoints(
                    scheme=definition.IPv4, addresses=[definition.Address(host=host, port=int(port))]
                ),
            )
        )
    assert [(a.host, a.port) for a in route.message_queues[0].broker.endpoints.addresses] == [(host, int(port))]
    producer = official(forwarder.address, "send", env)
    out, _ = producer.communicate(timeout=120)
    forwarder.close()
    assert producer.returncode == 0, out
    assert readable(broker) == [b"rmq-commit", b"rmq-normal"]


def test_an_advertised_address_is_what_routes_name(tmp_path):
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker = BrokerThread(broker_settings(tmp_path / "data", advertised_address=("mq.example.internal", 18081)))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{broker.broker.rocketmq_port}") as channel:
            route = service_grpc.MessagingServiceStub(channel).QueryRoute(
                service.QueryRouteRequest(topic=definition.Resource(name="orders"))
            )
        endpoints = route.message_queues[0].broker.endpoints
        assert endpoints.scheme == definition.DOMAIN_NAME
        assert [(a.host, a.port) for a in endpoints.addresses] == [("mq.example.internal", 18081)]
    finally:
        broker.stop()


def test_a_simple_consumer_receives_exactly_the_committed_messages_once_and_acks_them(compat):
    broker, endpoint, env = compat
    _out, _ = official(endpoint, "send", env).communicate(timeout=120)
    with RocketMQTransactionProducer(group="native", broker=broker.address, listener=ScriptedListener()) as producer:
        producer.send_message_in_transaction(Message(topic="orders", body=b"native-commit"))
    got = consume(endpoint, "audit", "drain", env)
    assert sorted(line.split()[1] for line in got) == ["native-commit", "rmq-commit", "rmq-normal"]
    assert all(line.split()[2] == "1" for line in got), "each message delivered once"
    assert consume(endpoint, "audit", "drain", env) == [], "acknowledged messages are not delivered again"
    offsets = {(c["queue_id"], c["offset"]) for c in httpx.get(f"{broker.http}/consumers").json()["items"]}
    with PullConsumer(group="x", broker=broker.address) as consumer:
        ends = {(q, high) for q, (_, high) in consumer.queue_offsets("orders").items() if high}
    assert ends <= offsets, "the group's committed offsets reached the end of every queue"


def test_changing_the_invisible_duration_redelivers_with_a_new_attempt(compat):
    _broker, endpoint, env = compat
    official(endpoint, "send", env).communicate(timeout=120)
    first, again = consume(endpoint, "redelivery", "redeliver", env)
    assert first.split()[0] == "FIRST" and first.split()[2] == "1"
    assert again.split()[:3] == ["AGAIN", first.split()[1], "2"]


@pytest.mark.spark
def test_messages_of_official_producers_are_readable_by_the_spark_source(compat, spark):
    broker, endpoint, env = compat
    official(endpoint, "send", env).communicate(timeout=120)
    rows = batch_reader(spark, broker.address).collect()
    assert sorted(r.body for r in rows) == [b"rmq-commit", b"rmq-normal"]
    assert {r.tags for r in rows} == {"rmq"}


@pytest.fixture(scope="session")
def node_client(tmp_path_factory) -> Path:
    """The official Node.js client (rocketmq-client-nodejs from npm) in a private folder."""
    modules = npm_install(tmp_path_factory.mktemp("node-client"), "rocketmq-client-nodejs@1.0.8")
    if isinstance(modules, str):
        pytest.skip(modules)
    return modules


def node(endpoint: str, env: dict[str, str], modules: Path, *args: str, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["node", str(ROOT / "tests" / "programs" / "rmq5_node.js"), endpoint, *args],
        env={**env, "NODE_PATH": str(modules)}, stdout=subprocess.PIPE, text=True, **popen,  # type: ignore[call-overload]
    )  # fmt: skip


def test_the_nodejs_producer_commits_and_rolls_back_and_its_simple_consumer_receives_once(compat, node_client):
    broker, endpoint, env = compat
    out, _ = node(endpoint, env, node_client, "send").communicate(timeout=120)
    sent = [line.split()[1] for line in out.splitlines() if line.startswith("SENT")]
    assert sent == ["node-commit", "node-rollback", "node-normal"]
    assert readable(broker) == [b"node-commit", b"node-normal"]
    with RocketMQTransactionProducer(group="native", broker=broker.address, listener=ScriptedListener()) as producer:
        producer.send_message_in_transaction(Message(topic="orders", body=b"native-commit"))
    drained, _ = node(endpoint, env, node_client, "drain", "node-audit").communicate(timeout=180)
    assert sorted(line.split()[1:] for line in drained.splitlines() if line.startswith("GOT")) == [
        ["native-commit", "1"],
        ["node-commit", "1"],
        ["node-normal", "1"],
    ]
    again, _ = node(endpoint, env, node_client, "drain", "node-audit").communicate(timeout=180)
    assert "GOT" not in again


def test_the_nodejs_producer_sends_a_delayed_message_and_recalls_another(compat, node_client):
    broker, endpoint, env = compat
    out, _ = node(endpoint, env, node_client, "delay").communicate(timeout=120)
    sent = {line.split()[1]: line.split()[2] for line in out.splitlines() if line.startswith("SENT")}
    assert f"RECALLED {sent['node-delay-recalled']}" in out.splitlines(), out
    assert readable(broker) == [], "held until due"
    wait_until(lambda: readable(broker) == [b"node-delay-kept"], timeout=15)
    drained, _ = node(endpoint, env, node_client, "drain", "node-delays").communicate(timeout=180)
    assert [line.split()[1:] for line in drained.splitlines() if line.startswith("GOT")] == [["node-delay-kept", "1"]]


def test_the_nodejs_fifo_producer_and_simple_consumer_keep_each_message_group_in_order(compat, node_client):
    broker, endpoint, env = compat
    out, _ = node(endpoint, env, node_client, "fifo").communicate(timeout=120)
    assert len([line for line in out.splitlines() if line.startswith("SENT")]) == 6, out
    httpx.put(f"{broker.http}/consumers/node-fifo/retry-policy", json={"fifo": True}).raise_for_status()
    drained, _ = node(endpoint, env, node_client, "fifo-drain", "node-fifo").communicate(timeout=180)
    got = [line.split()[1:] for line in drained.splitlines() if line.startswith("GOT")]
    for group in "ab":
        mine = [(body, attempt) for body, attempt, _ in got if body[0] == group]
        assert mine == [(f"{group}{n}", "1") for n in (1, 2, 3)], got
    rounds = Counter((round_, body[0]) for body, _, round_ in got)
    assert max(rounds.values()) == 1, f"two messages of one group in one receive: {got}"


def test_nodejs_push_consumers_are_redelivered_by_the_group_s_policy_then_dead_lettered(compat, node_client):
    broker, endpoint, env = compat
    for group in ("node-flaky", "node-failing"):
        policy = {"max_attempts": 4, "backoff_seconds": [0.5]}
        httpx.put(f"{broker.http}/consumers/{group}/retry-policy", json=policy).raise_for_status()
    with Producer(broker=broker.address) as producer:
        producer.send(Message(topic="orders", body=b"task"))

    def pushed(group: str, behaviour: str) -> list[str]:
        out, _ = node(endpoint, env, node_client, "push", group, behaviour, "8").communicate(timeout=120)
        return [line for line in out.splitlines() if line.startswith("GOT")]

    assert pushed("node-flaky", "flaky") == ["GOT task 1", "GOT task 2", "GOT task 3"]
    assert pushed("node-failing", "failing") == [f"GOT task {n}" for n in (1, 2, 3, 4)]
    for queue_id in range(4):  # the group's next receive moves it, its last backoff over
        broker.run(broker.broker.messaging.receive("node-failing", "orders", queue_id, 1, 1, None))
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        (letter,) = consumer.pull("%DLQ%node-failing", queue_id=0, offset=0).messages
    assert (letter.body, letter.properties["DELIVERY_ATTEMPTS"]) == (b"task", "4")
    assert "%DLQ%node-flaky" not in [t.name for t in broker.broker.messaging.topics()]


def test_an_official_simple_consumer_that_never_acks_gets_a_message_the_maximum_times_then_it_is_dead_lettered(
    compat,
):
    broker, endpoint, env = compat
    httpx.put(f"{broker.http}/consumers/forgetful/retry-policy", json={"max_attempts": 3}).raise_for_status()
    with Producer(broker=broker.address) as producer:
        producer.send(Message(topic="orders", body=b"job"))
    assert consume(endpoint, "forgetful", "never-ack", env) == ["GOT job 1", "GOT job 2", "GOT job 3"]
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        (letter,) = consumer.pull("%DLQ%forgetful", queue_id=0, offset=0).messages
    assert (letter.body, letter.properties["DELIVERY_ATTEMPTS"]) == (b"job", "3")


def test_a_nodejs_checker_commits_the_orphaned_transaction_of_a_killed_nodejs_producer(compat, node_client):
    broker, endpoint, env = compat
    orphan = node(endpoint, env, node_client, "orphan")
    try:
        assert orphan.stdout is not None and orphan.stdout.readline().strip() == "ORPHANED"
    finally:
        os.kill(orphan.pid, signal.SIGKILL)
        orphan.wait()
    checker = node(endpoint, env, node_client, "checker", stdin=subprocess.PIPE)
    try:
        assert checker.stdout is not None and checker.stdout.readline().strip() == "CHECKER READY"
        wait_until(
            lambda: [r[3] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == [b"node-orphan"], 60
        )
    finally:
        assert checker.stdin is not None
        checker.stdin.close()
        out = checker.stdout.read() if checker.stdout else ""
        checker.wait(60)
    assert "CHECKED node-orphan" in out
    assert broker.broker.store.pending_count() == 0


@pytest.mark.slow
def test_official_clients_reconnect_across_a_broker_restart_without_loss_or_duplicates(tmp_path):
    """The producer's sends reconnect at once. Its Telemetry stream, the only path for checks,
    is rebuilt by the Python client only every 300 s, so a fresh checker process answers any
    check from the same durable local state (as a peer of a restarted service would)."""
    broker = BrokerProcess(
        tmp_path / "data", "--check-interval", "0.3", "--transaction-timeout", "1", "--check-timeout", "1"
    )
    broker.start()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "RMQ_LOCAL_STATE": str(tmp_path / "local-state")}
    endpoint = f"127.0.0.1:{broker.rocketmq_port}"
    producer = official(endpoint, "stream", env)
    checker = None
    lines: list[str] = []
    try:
        assert producer.stdout is not None
        while len([line for line in lines if line.startswith("ACK")]) < 10:
            lines.append(producer.stdout.readline().strip())
        broker.kill()
        broker.start()
        while (line := producer.stdout.readline().strip()) != "DONE":
            assert line, f"the producer exited early after {lines}"
            lines.append(line)
        producer.wait(60)
        checker = official(endpoint, "checker", env, stdin=subprocess.PIPE)
        try:
            wait_until(lambda: query_pending(broker.data_dir) == 0, 60)
        except AssertionError:
            raise AssertionError(f"still pending after the restart; the producer printed {lines}") from None
    finally:
        for process in (producer, checker):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        broker.stop()
    acked = {line.split()[1] for line in lines if line.startswith("ACK")}
    bodies = Counter(r[3].decode() for r in topic_rows(broker.data_dir, "orders"))
    assert all(n == 1 for n in bodies.values()), f"duplicates: {bodies}"
    assert acked <= set(bodies), "an acknowledged commit was lost"
    assert set(bodies) == {f"rmq-stream-{n}" for n in range(40)}
    assert broker.log.read_text().count("serving gRPC") == 2, "the broker restarted during the stream"


def query_pending(data_dir: Path) -> int:
    import sqlite3

    from broker.store import DB_FILE

    with sqlite3.connect(data_dir / DB_FILE) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM transactions WHERE state = 'PENDING'").fetchone()[0])


def test_sends_are_idempotent_by_message_id_and_bad_ones_get_typed_statuses(compat):
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker, endpoint, _ = compat

    def message(topic: str, body: bytes, message_type: int, message_id: str, **system: object) -> object:
        return definition.Message(
            topic=definition.Resource(name=topic),
            system_properties=definition.SystemProperties(
                message_id=message_id, message_type=message_type, tag="t", **system
            ),
            body=body,
        )

    with grpc.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        for message_type in (definition.TRANSACTION, definition.NORMAL):
            request = service.SendMessageRequest(messages=[message("orders", b"x", message_type, f"id-{message_type}")])
            first, second = stub.SendMessage(request), stub.SendMessage(request)
            assert first.status.code == second.status.code == definition.OK
            assert first.entries[0].transaction_id == second.entries[0].transaction_id
        assert broker.broker.store.pending_count() == 1, "a retried half message is stored once"
        assert len(topic_rows(broker.broker.settings.data_dir, "orders")) == 1, (
            "a retried normal message is stored once"
        )
        before = store_snapshot(broker.broker.settings.data_dir)
        no_group = definition.ILLEGAL_MESSAGE_GROUP
        for msg, code in (
            (message("nope", b"x", definition.NORMAL, "a1"), definition.TOPIC_NOT_FOUND),
            (message("orders", b"x" * (5 * 1024 * 1024), definition.NORMAL, "a2"), definition.MESSAGE_BODY_TOO_LARGE),
            (message("orders", b"x", definition.FIFO, "a3"), definition.ILLEGAL_MESSAGE_GROUP),
            (message("orders", b"x", definition.NORMAL, "a6", message_group="g"), definition.ILLEGAL_MESSAGE_GROUP),
            (message("orders", b"x", definition.TRANSACTION, "a7", message_group="g"), no_group),
            (message("orders", b"x", definition.PRIORITY, "a5"), definition.UNSUPPORTED),
            (message("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"x", definition.NORMAL, "a4"), definition.ILLEGAL_TOPIC),
        ):
            reply = stub.SendMessage(service.SendMessageRequest(messages=[msg]))
            assert reply.status.code == code and reply.entries[0].status.code == code
        bad_end = stub.EndTransaction(
            service.EndTransactionRequest(
                topic=definition.Resource(name="orders"), transaction_id="0" * 32, resolution=definition.COMMIT
            )
        )
        assert bad_end.status.code == definition.INVALID_TRANSACTION_ID
        assert store_snapshot(broker.broker.settings.data_dir) == before


def test_with_an_auth_token_official_clients_must_sign_with_it(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret"))
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    endpoint = f"127.0.0.1:{broker.broker.rocketmq_port}"
    try:
        refused, _ = official(endpoint, "send", {**env, "RMQ_SK": "wrong"}).communicate(timeout=120)
        assert "SENT" not in refused
        unsigned, _ = official(endpoint, "send", env).communicate(timeout=120)
        assert "SENT" not in unsigned
        assert topic_rows(broker.broker.settings.data_dir, "orders") == []
        signed, _ = official(endpoint, "send", {**env, "RMQ_SK": "s3cret"}).communicate(timeout=120)
        assert "SENT rmq-commit" in signed
        assert readable_with_token(broker) == [b"rmq-commit", b"rmq-normal"]
    finally:
        broker.stop()


def readable_with_token(broker) -> list[bytes]:
    with PullConsumer(group="audit", broker=broker.address, token="s3cret") as consumer:
        return sorted(m.body for q in range(4) for m in consumer.pull("orders", queue_id=q, offset=0).messages)


def test_a_signature_over_an_old_future_or_empty_date_is_refused_and_stores_nothing(tmp_path):
    """The signature covers only x-mq-date-time: the date must be within 15 minutes of now, so a
    captured signature stops working (issue 11). Clients write local time with a "Z", so a date
    near the broker's local clock counts as well as one near its UTC clock."""
    import hashlib
    import hmac
    from datetime import UTC, datetime, timedelta

    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret"))
    now = datetime.now(UTC)

    def signed(date: str) -> list[tuple[str, str]]:
        signature = hmac.new(b"s3cret", date.encode(), hashlib.sha1).hexdigest()
        authorization = f"MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature={signature}"
        return [("x-mq-date-time", date), ("authorization", authorization)]

    def stamp(moment: datetime) -> str:
        return moment.strftime("%Y%m%dT%H%M%SZ")

    send = service.SendMessageRequest(
        messages=[
            definition.Message(
                topic=definition.Resource(name="orders"),
                system_properties=definition.SystemProperties(message_id="sig-1", message_type=definition.NORMAL),
                body=b"x",
            )
        ]
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{broker.broker.rocketmq_port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            before = store_snapshot(broker.broker.settings.data_dir)
            for date in ("20000101T000000Z", "", stamp(now - timedelta(minutes=16)),
                         stamp(now + timedelta(minutes=16)), "not a date"):  # fmt: skip
                with pytest.raises(grpc.RpcError) as refused:
                    stub.SendMessage(send, metadata=signed(date))
                assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED, date
            assert store_snapshot(broker.broker.settings.data_dir) == before
            for moment in (now - timedelta(minutes=14), now.astimezone().replace(tzinfo=None)):
                reply = stub.SendMessage(send, metadata=signed(stamp(moment)))
                assert reply.status.code == definition.OK
        assert [r[0] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == ["sig-1"]
    finally:
        broker.stop()


def test_loading_the_front_ends_protocol_leaves_the_official_client_importable(tmp_path):
    """The front end loads only the generated modules, through stand-in packages that it removes,
    so a process that also uses the official client (a test, an app embedding the broker) gets
    the real ``rocketmq`` package afterwards."""
    program = (
        "from broker.rocketmq_api.protocol import load\n"
        "definition, _, _ = load()\n"
        "from rocketmq import ClientConfiguration, Credentials, Producer\n"
        "import rocketmq.grpc_protocol\n"
        "assert rocketmq.grpc_protocol.definition_pb2.Resource(name='x').SerializeToString()"
        " == definition.Resource(name='x').SerializeToString()\n"
        "print('real client', Producer.__module__)\n"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env={**os.environ, "HOME": str(tmp_path)},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "real client rocketmq" in result.stdout


@pytest.mark.parametrize("port", ["grpc_port", "rocketmq_port"])
def test_a_second_broker_cannot_share_a_port_of_a_running_one(tmp_path, port):
    """Neither gRPC port sets SO_REUSEPORT, so a second broker fails to bind instead of silently
    taking half of the first one's connections."""
    first = BrokerThread(broker_settings(tmp_path / "first"))
    try:
        with pytest.raises(RuntimeError, match="Failed to bind"):
            BrokerThread(broker_settings(tmp_path / "second", **{port: getattr(first.broker, port)}))
    finally:
        first.stop()
