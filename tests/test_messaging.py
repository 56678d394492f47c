"""Normal messages, pulls and consumer offsets through the SDK over real gRPC."""

from __future__ import annotations

import grpc
import pytest

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import Message, Producer, PullConsumer, TopicExists
from tests.support import ScriptedListener, topic_rows


def test_a_normal_message_is_readable_at_the_position_its_receipt_names(broker):
    with Producer(broker=broker.address) as producer, PullConsumer(group="c", broker=broker.address) as consumer:
        receipt = producer.send(Message(topic="orders", body=b"plain", keys=["k"]))
        result = consumer.pull("orders", queue_id=receipt.queue_id, offset=receipt.queue_offset)
    assert [m.body for m in result.messages] == [b"plain"]
    assert (result.next_offset, result.min_offset, result.max_offset) == (receipt.queue_offset + 1, 0, 1)
    assert result.messages[0].store_timestamp > 0 and result.messages[0].transaction_id == ""


def test_a_retried_normal_send_is_stored_once(broker):
    with Producer(broker=broker.address) as producer:
        message = Message(topic="orders", body=b"once")
        assert producer.send(message) == producer.send(message)
    assert len(topic_rows(broker.broker.settings.data_dir, "orders")) == 1


def test_a_batch_is_stored_whole(broker):
    with Producer(broker=broker.address) as producer:
        receipts = producer.send_batch([Message(topic="orders", body=str(i).encode()) for i in range(5)])
    stored = [row[0] for row in topic_rows(broker.broker.settings.data_dir, "orders")]
    assert sorted(r.message_id for r in receipts) == sorted(stored)


def test_a_message_id_repeated_in_a_batch_is_stored_once(broker):
    with Producer(broker=broker.address) as producer:
        batch = [Message(topic="orders", body=str(i).encode(), message_id="same") for i in range(3)]
        receipts = producer.send_batch(batch)
    assert len({(r.queue_id, r.queue_offset) for r in receipts}) == 1


def test_pulls_page_through_a_queue_with_next_offset(broker):
    with Producer(broker=broker.address) as producer, PullConsumer(group="c", broker=broker.address) as consumer:
        queue = producer.send(Message(topic="orders", body=b"first", message_id="a")).queue_id
        for i in range(9):
            producer.send(Message(topic="orders", body=f"m{i}".encode(), message_id=f"a{i}"))
        total = consumer.queue_offsets("orders")[queue][1]
        seen, offset = [], 0
        while offset < total:
            page = consumer.pull("orders", queue_id=queue, offset=offset, max_messages=2)
            assert len(page.messages) <= 2
            seen += [m.queue_offset for m in page.messages]
            offset = page.next_offset
        empty = consumer.pull("orders", queue_id=queue, offset=offset)
    assert seen == list(range(total))
    assert (empty.messages, empty.next_offset) == ([], total)


def test_consumer_offsets_are_committed_per_group(broker):
    with Producer(broker=broker.address) as producer:
        producer.send_batch([Message(topic="orders", body=b"%d" % i) for i in range(40)])
    with PullConsumer(group="c1", broker=broker.address) as one, PullConsumer(group="c2", broker=broker.address) as two:
        _, end = one.queue_offsets("orders")[1]
        one.commit_offset("orders", queue_id=1, offset=end - 2)
        one.commit_offset("orders", queue_id=1, offset=end)
        assert one.committed_offsets("orders") == {1: end}
        assert two.committed_offsets("orders") == {}


def test_topics_are_created_idempotently_and_system_topics_stay_hidden(broker):
    with Producer(broker=broker.address) as producer:
        assert producer.create_topic("payments", 2) is True
        assert producer.create_topic("payments", 2) is False
        with pytest.raises(TopicExists):
            producer.create_topic("payments", 3)
    with grpc.insecure_channel(broker.address) as channel:
        topics = pb_grpc.BrokerStub(channel).ListTopics(pb.ListTopicsRequest()).topics
    assert [(t.name, t.queues) for t in topics] == [("orders", 4), ("payments", 2)]


def test_a_plain_string_is_one_key():
    assert Message(topic="orders", body=b"", keys="o-1").keys == ("o-1",)
    assert list(Message(topic="orders", body=b"", keys=["o-1", "o-2"]).keys) == ["o-1", "o-2"]


def test_a_key_given_as_a_string_is_stored_as_one_key(broker):
    with Producer(broker=broker.address) as producer:
        receipt = producer.send(Message(topic="orders", body=b"k", keys="o-1"))
    with PullConsumer(group="c", broker=broker.address) as consumer:
        (message,) = consumer.pull(
            "orders", queue_id=receipt.queue_id, offset=receipt.queue_offset, max_messages=1
        ).messages
    assert list(message.keys) == ["o-1"]


def test_the_sdk_s_old_names_still_work_and_warn(broker):
    import producer_sdk

    renamed = {
        "AsyncTransactionProducer": "AsyncRocketMQTransactionProducer",
        "AsyncTransactionalProducer": "AsyncKafkaTransactionProducer",
        "TransactionalProducer": "KafkaTransactionProducer",
        "TransactionNotFound": "RocketMQTransactionNotFound",
        "TransactionalIdNotFound": "KafkaTransactionalIdNotFound",
        "SendResult": "TransactionSendResult",
    }
    for old, new in renamed.items():
        with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: use {new}"):
            assert getattr(producer_sdk, old) is getattr(producer_sdk, new)
    with pytest.warns(DeprecationWarning, match="use RocketMQTransactionProducer"):
        old_producer = producer_sdk.TransactionProducer(group="old", broker=broker.address, listener=ScriptedListener())
    with old_producer:  # it connects at ``with`` (or start()), as it did
        sent = old_producer.send_message_in_transaction(Message(topic="orders", body=b"old", keys=("o-old",)))
    assert sent.state is producer_sdk.TransactionState.COMMITTED


def test_every_value_is_stored_as_sent_whatever_its_neighbours_in_the_batch(broker):
    """The insert binds a column holding one value once and any other as its values end to end;
    each message comes back exactly as sent, across topics, queues, and values of every shape."""
    with Producer(broker=broker.address) as producer:
        producer.create_topic("audit", queues=2)
        sent = [
            Message(topic="orders", body=b"", message_id="a", tags=""),
            Message(topic="audit", body=b"\x00\xff" * 600, message_id="b", tags="t\x00g é 🎉", keys=["k", 'q"\\'],
                    properties={"ü": "ß", "x": "\n\t"}),
            Message(topic="orders", body="é".encode(), message_id="c.d:e-f_0", tags="plain", keys=["日本"]),
            Message(topic="audit", body=b"x", message_id="g"),
            Message(topic="orders", body=b"", message_id="h", tags="plain"),
        ]  # fmt: skip
        receipts = producer.send_batch(sent)
    with PullConsumer(group="c", broker=broker.address) as consumer:
        for message, receipt in zip(sent, receipts, strict=True):
            (got,) = consumer.pull(message.topic, queue_id=receipt.queue_id, offset=receipt.queue_offset).messages[:1]
            assert (got.message_id, got.body, got.tags, got.keys, got.properties) == (
                message.message_id, message.body, message.tags, tuple(message.keys), message.properties,
            )  # fmt: skip
