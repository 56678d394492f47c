"""Kafka transactions through the Kafka port with the official transactional clients
(confluent-kafka and aiokafka), read by confluent-kafka under read_committed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from halfmq_testing import EmbeddedBroker
from producer_sdk import Message, Producer
from tests.kafka_clients import Session, run_client

TRANSACTIONAL_CLIENTS = ("confluent-kafka", "aiokafka")


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as running:
        yield running


def read(broker: EmbeddedBroker, *topics: str) -> dict[str, list[str]]:
    (line,) = run_client("confluent-kafka", broker.kafka_bootstrap, None, "read", ",".join(topics))
    return line["values"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("client", TRANSACTIONAL_CLIENTS)
def test_committed_messages_show_together_aborted_never_and_an_open_one_holds_back_its_partitions(broker, client):
    a, b = f"ledger-{client}", f"audit-{client}"
    broker.create_topic(a, 1)
    broker.create_topic(b, 2)
    session = Session(client, broker.kafka_bootstrap, f"tx-{client}")
    try:
        replies = session.do("begin", f"produce {a} 0 c1", f"produce {b} 1 c2", "commit")
        replies += session.do("begin", f"produce {a} 0 x1", f"produce {b} 0 x2", "flush", "abort")
        assert all("done" in reply for reply in replies), replies
        assert read(broker, a, b) == {a: ["c1"], b: ["c2"]}

        assert session.do("begin", f"produce {a} 0 open1", f"produce {b} 0 open2", "flush")[-1] == {"done": "flush"}
        with Producer(broker=broker.address) as native:
            native.send(Message(topic=a, body=b"later"))
        assert read(broker, a, b) == {a: ["c1"], b: ["c2"]}, "the open transaction holds its partitions back"
        assert session.do("commit") == [{"done": "commit"}]
        after = read(broker, a, b)
        assert after[a] == ["c1", "open1", "later"], "one partition: in its order"
        assert sorted(after[b]) == ["c2", "open2"], "one record in each of two partitions: no order between them"
    finally:
        session.close()


@pytest.mark.parametrize("client", TRANSACTIONAL_CLIENTS)
def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker, client):
    topic = f"fenced-{client}"
    broker.create_topic(topic, 1)
    first = Session(client, broker.kafka_bootstrap, f"fence-{client}")
    try:
        assert all("done" in r for r in first.do("begin", f"produce {topic} 0 old", "flush"))
        second = Session(client, broker.kafka_bootstrap, f"fence-{client}")
        try:
            (commit,) = first.do("commit")
            assert "error" in commit, "the fenced producer's commit fails"
            assert all("done" in r for r in second.do("begin", f"produce {topic} 0 new", "commit"))
        finally:
            second.close()
    finally:
        first.kill()
    assert read(broker, topic) == {topic: ["new"]}
