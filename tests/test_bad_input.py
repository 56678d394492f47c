"""Every RPC refuses bad input with a typed error and leaves the store untouched (guarantee 7)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path

import grpc
import pytest

from broker.model import HALF_TOPIC, OP_TOPIC
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import (
    HiddenTopic,
    Message,
    MessageTooLarge,
    Producer,
    ProducerGroupMismatch,
    TopicNotFound,
)
from producer_sdk import InvalidArgument as SdkInvalidArgument
from producer_sdk.errors import from_item_error
from tests.support import BrokerThread, broker_settings, send_half, store_snapshot

S = grpc.StatusCode
MAX_BODY = 1024


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerThread, str]]:
    broker = BrokerThread(broker_settings(tmp_path_factory.mktemp("bad") / "data", max_body_bytes=MAX_BODY))
    with grpc.insecure_channel(broker.address) as channel:
        stub = pb_grpc.BrokerStub(channel)
        half = send_half(stub, pb.Message(topic="orders", body=b"x", message_id="seed"), "g")
        stub.SendBatch(pb.SendBatchRequest(messages=[pb.Message(topic="orders", body=b"n", message_id="taken")]))
    yield broker, half.transaction_id
    broker.stop()


def msg(topic="orders", body=b"x", message_id="m-1", keys=()):
    return pb.Message(topic=topic, body=body, message_id=message_id, keys=keys)


def half(message, group="g"):
    return pb.SendHalfMessageRequest(message=message, producer_group=group)


def end(txid, group="g", resolution=pb.COMMIT, source=pb.CLIENT):
    return pb.EndTransactionRequest(transaction_id=txid, producer_group=group, resolution=resolution, source=source)


def packed(values, offsets=None):
    """A PackedColumn of ``values`` (bytes), or with the given offsets as they are."""
    offsets = list(accumulate(map(len, values), initial=0)) if offsets is None else offsets
    return pb.PackedColumn(offsets=array("i", offsets).tobytes(), data=b"".join(values))


def columns(topic="orders", count=1, ids=None, bodies=None, **fields):
    ids = packed([b"c-%d" % i for i in range(count)]) if ids is None else ids
    bodies = packed([b"x"] * count) if bodies is None else bodies
    return pb.SendColumnsRequest(
        topic=topic, messages=pb.MessageColumns(count=count, message_ids=ids, bodies=bodies, **fields)
    )


TXID = "{txid}"
UNKNOWN_TXID = "0" * 32
COLUMNS_CASES = [
    (columns(topic="nope"), S.NOT_FOUND, "TOPIC_NOT_FOUND"),
    (columns(topic=HALF_TOPIC), S.PERMISSION_DENIED, "HIDDEN_TOPIC"),
    (columns(count=0), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (columns(count=1025), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (columns(count=-1, ids=packed([]), bodies=packed([])), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (columns(ids=pb.PackedColumn()), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),  # ids are always given
    (columns(count=2, ids=packed([b"a"])), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),  # one id short
    (columns(count=2, bodies=packed([b"ab"], [0, 2, 1])), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),  # going back
    (columns(bodies=packed([b"ab"], [0, 9])), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),  # past the data
    (columns(tags=packed([b"t"], [0, 1, 1])), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),  # one offset too many
    (columns(born_timestamps=b"\x00" * 7), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
]
CASES = [
    *(("SendColumns", request, status, code) for request, status, code in COLUMNS_CASES),
    ("SendBatch", pb.SendBatchRequest(messages=[msg(topic="nope")]), S.NOT_FOUND, "TOPIC_NOT_FOUND"),
    ("SendBatch", pb.SendBatchRequest(messages=[msg(topic=HALF_TOPIC)]), S.PERMISSION_DENIED, "HIDDEN_TOPIC"),
    ("SendBatch", pb.SendBatchRequest(messages=[msg(topic="")]), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (
        "SendBatch",
        pb.SendBatchRequest(messages=[msg(body=b"x" * (MAX_BODY + 1))]),
        S.INVALID_ARGUMENT,
        "MESSAGE_TOO_LARGE",
    ),
    (
        "SendBatch",
        pb.SendBatchRequest(messages=[msg(message_id="not valid!")]),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    ("SendBatch", pb.SendBatchRequest(messages=[msg(message_id="")]), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    ("SendBatch", pb.SendBatchRequest(messages=[msg(keys=[""])]), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    ("SendBatch", pb.SendBatchRequest(messages=[]), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (
        "SendBatch",
        pb.SendBatchRequest(messages=[msg(message_id="ok-1"), msg(topic=OP_TOPIC, message_id="ok-2")]),
        S.PERMISSION_DENIED,
        "HIDDEN_TOPIC",
    ),
    ("SendBatch", pb.SendBatchRequest(messages=[msg(message_id="seed")]), S.ALREADY_EXISTS, "MESSAGE_ID_IN_USE"),
    (
        "Pull",
        pb.PullRequest(topic=HALF_TOPIC, queue_id=0, offset=0, max_messages=1),
        S.PERMISSION_DENIED,
        "HIDDEN_TOPIC",
    ),
    ("Pull", pb.PullRequest(topic="nope", queue_id=0, offset=0, max_messages=1), S.NOT_FOUND, "TOPIC_NOT_FOUND"),
    (
        "Pull",
        pb.PullRequest(topic="orders", queue_id=4, offset=0, max_messages=1),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    (
        "Pull",
        pb.PullRequest(topic="orders", queue_id=0, offset=-1, max_messages=1),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    (
        "Pull",
        pb.PullRequest(topic="orders", queue_id=0, offset=0, max_messages=0),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    ("GetQueueOffsets", pb.GetQueueOffsetsRequest(topic=OP_TOPIC), S.PERMISSION_DENIED, "HIDDEN_TOPIC"),
    ("GetQueueOffsets", pb.GetQueueOffsetsRequest(topic="nope"), S.NOT_FOUND, "TOPIC_NOT_FOUND"),
    (
        "CommitConsumerOffset",
        pb.CommitConsumerOffsetRequest(consumer_group="", topic="orders", queue_id=0, offset=1),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    (
        "CommitConsumerOffset",
        pb.CommitConsumerOffsetRequest(consumer_group="c", topic="orders", queue_id=9, offset=1),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    (
        "CommitConsumerOffset",
        pb.CommitConsumerOffsetRequest(consumer_group="c", topic="orders", queue_id=0, offset=-5),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    (
        "CommitConsumerOffset",
        pb.CommitConsumerOffsetRequest(consumer_group="c", topic=HALF_TOPIC, queue_id=0, offset=0),
        S.PERMISSION_DENIED,
        "HIDDEN_TOPIC",
    ),
    (
        "GetConsumerOffsets",
        pb.GetConsumerOffsetsRequest(consumer_group="c", topic="nope"),
        S.NOT_FOUND,
        "TOPIC_NOT_FOUND",
    ),
    (
        "CreateTopic",
        pb.CreateTopicRequest(topic=pb.Topic(name=HALF_TOPIC, queues=1)),
        S.PERMISSION_DENIED,
        "HIDDEN_TOPIC",
    ),
    (
        "CreateTopic",
        pb.CreateTopicRequest(topic=pb.Topic(name="a b", queues=1)),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    ("CreateTopic", pb.CreateTopicRequest(topic=pb.Topic(name="t", queues=0)), S.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (
        "CreateTopic",
        pb.CreateTopicRequest(topic=pb.Topic(name="t", queues=9999)),
        S.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    ),
    ("CreateTopic", pb.CreateTopicRequest(topic=pb.Topic(name="orders", queues=2)), S.ALREADY_EXISTS, "TOPIC_EXISTS"),
]


# Items of the batch RPCs that take each item on its own (a single item is a batch of one): a bad
# item gets its typed error as its outcome, and the call succeeds.
ITEM_CASES = [
    ("SendHalfMessages", half(msg(topic="nope")), "TOPIC_NOT_FOUND"),
    ("SendHalfMessages", half(msg(topic=HALF_TOPIC)), "HIDDEN_TOPIC"),
    ("SendHalfMessages", half(msg(body=b"x" * (MAX_BODY + 1))), "MESSAGE_TOO_LARGE"),
    ("SendHalfMessages", half(msg(message_id="../etc")), "INVALID_ARGUMENT"),
    ("SendHalfMessages", half(msg(), group=""), "INVALID_ARGUMENT"),
    ("SendHalfMessages", half(msg(), group="bad group"), "INVALID_ARGUMENT"),
    ("SendHalfMessages", half(msg(message_id="taken")), "MESSAGE_ID_IN_USE"),
    ("SendHalfMessages", half(msg(message_id="seed"), group="other"), "MESSAGE_ID_IN_USE"),
    ("EndTransactions", end("not-hex"), "INVALID_ARGUMENT"),
    ("EndTransactions", end(UNKNOWN_TXID), "TRANSACTION_NOT_FOUND"),
    ("EndTransactions", end(TXID, group="other"), "PRODUCER_GROUP_MISMATCH"),
    ("EndTransactions", end(TXID, group="other", resolution=pb.UNKNOWN), "PRODUCER_GROUP_MISMATCH"),
    ("EndTransactions", end(TXID, resolution=pb.RESOLUTION_UNSPECIFIED), "INVALID_ARGUMENT"),
    ("EndTransactions", end(TXID, resolution=99), "INVALID_ARGUMENT"),
    ("EndTransactions", end(TXID, source=99), "INVALID_ARGUMENT"),
]
BATCHES = {"SendHalfMessages": pb.SendHalfMessagesRequest, "EndTransactions": pb.EndTransactionsRequest}


@pytest.mark.parametrize(
    ("method", "request_", "status", "code"), CASES, ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(CASES)]
)
def test_a_bad_request_gets_a_typed_error_and_changes_nothing(running, method, request_, status, code):
    broker, txid = running
    data_dir: Path = broker.broker.settings.data_dir
    before = store_snapshot(data_dir)
    with grpc.insecure_channel(broker.address) as channel:
        rpc = getattr(pb_grpc.BrokerStub(channel), method)
        with pytest.raises(grpc.RpcError) as refused:
            rpc(_with_txid(request_, txid))
    assert refused.value.code() is status
    assert dict(refused.value.trailing_metadata())["halfmq-error"] == code
    assert refused.value.details()
    assert store_snapshot(data_dir) == before


@pytest.mark.parametrize(
    ("method", "item", "code"), ITEM_CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(ITEM_CASES)]
)
def test_a_bad_item_gets_its_typed_error_and_changes_nothing(running, method, item, code):
    broker, txid = running
    data_dir: Path = broker.broker.settings.data_dir
    before = store_snapshot(data_dir)
    with grpc.insecure_channel(broker.address) as channel:
        reply = getattr(pb_grpc.BrokerStub(channel), method)(BATCHES[method](items=[_with_txid(item, txid)]))
    (outcome,) = reply.outcomes
    assert outcome.WhichOneof("outcome") == "error" and outcome.error.code == code and outcome.error.message
    assert store_snapshot(data_dir) == before


def _with_txid(request, txid):
    if isinstance(request, pb.EndTransactionRequest) and request.transaction_id == TXID:
        copy = pb.EndTransactionRequest()
        copy.CopyFrom(request)
        copy.transaction_id = txid
        return copy
    return request


@pytest.mark.parametrize(
    "first",
    [
        pb.SessionUp(answer=pb.CheckAnswer(transaction_id="0" * 32, resolution=pb.COMMIT)),
        pb.SessionUp(hello=pb.Hello()),
    ],
)
def test_a_session_must_start_with_a_valid_hello(running, first):
    broker, _ = running
    before = store_snapshot(broker.broker.settings.data_dir)
    with grpc.insecure_channel(broker.address) as channel:
        replies = pb_grpc.BrokerStub(channel).ProducerSession(iter([first]))
        with pytest.raises(grpc.RpcError) as refused:
            list(replies)
    assert refused.value.code() is S.INVALID_ARGUMENT
    assert store_snapshot(broker.broker.settings.data_dir) == before


def test_the_sdk_raises_typed_errors(running):
    broker, txid = running
    with Producer(broker=broker.address) as producer:
        with pytest.raises(TopicNotFound):
            producer.send(Message(topic="nope", body=b""))
        with pytest.raises(HiddenTopic):
            producer.send(Message(topic=HALF_TOPIC, body=b""))
        with pytest.raises(MessageTooLarge):
            producer.send(Message(topic="orders", body=b"x" * (MAX_BODY + 1)))
        with pytest.raises(SdkInvalidArgument):
            producer.send(Message(topic="orders", body=b"", message_id="bad id"))

    with grpc.insecure_channel(broker.address) as channel:
        reply = pb_grpc.BrokerStub(channel).EndTransactions(pb.EndTransactionsRequest(items=[end(txid, group="other")]))
    mismatch = from_item_error(reply.outcomes[0].error)
    assert isinstance(mismatch, ProducerGroupMismatch) and "belongs to producer group 'g'" in str(mismatch)
