"""The plain producer: normal (non-transactional) messages, one at a time or in batches."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._blocking import BlockingClient
from producer_sdk._client import SENDS, TlsCa, message_to_pb, receipt_from_pb
from producer_sdk.columns import send_table
from producer_sdk.message import Message, SendReceipt


class Producer(BlockingClient):
    """Blocking producer of normal messages; use as ``with``; safe to share between threads. A
    send retried after a broker failure carries the same message id, so the broker stores it once.

    Sends from concurrent threads share calls: what they send while an earlier call is in flight
    goes out together in the next call, each message with its own result or error. ``linger``
    seconds of waiting buy bigger batches.
    """

    def __init__(
        self,
        *,
        broker: str,
        timeout: float = 10.0,
        token: str | None = None,
        linger: float = 0.0,
        tls_ca: TlsCa = None,
    ) -> None:
        """``tls_ca``: the PEM file of the CA that signed the broker's certificate; TLS is on when given."""
        super().__init__(broker=broker, timeout=timeout, token=token, tls_ca=tls_ca)
        self._sends = self._client.batcher(SENDS, linger=linger)

    def send(self, msg: Message) -> SendReceipt:
        return receipt_from_pb(self._loop.run(self._sends.submit(message_to_pb(msg))))

    def send_batch(self, msgs: Sequence[Message]) -> list[SendReceipt]:
        """Store all of ``msgs`` or none of them."""
        response = self._call("SendBatch", pb.SendBatchRequest(messages=[message_to_pb(m) for m in msgs]))
        return [receipt_from_pb(r) for r in response.results]

    def send_table(self, topic: str, table: pa.Table | pa.RecordBatch) -> pa.Table:
        """Send every row of ``table`` as a message of ``topic``; the rows go in calls of up to
        1024 messages and 4 MiB of bodies, a few in flight at once, each call's rows to one queue
        (the topic's queues take turns). Columns: ``body`` (binary or string) and, optionally,
        ``message_id`` (a fresh id where missing or null), ``keys`` (a string or a list of strings),
        ``tags`` and ``properties`` (map of strings). Returns the receipts: message_id, queue_id,
        queue_offset, one row per row of ``table``.

        Each row is stored or refused on its own, and a message id already in the topic keeps its
        position (so a table sent again with its message ids is stored once). If rows were
        refused, every other row is still sent, then the first refused row's error is raised,
        naming the row, with the receipts (null where refused) as its ``receipts``. Raises
        ValueError for a column the table may not have, before anything is sent."""
        return self._loop.run(send_table(self._client, topic, table))

    def recall(self, topic: str, recall_handle: str) -> str:
        """Cancel a delayed message before it is due, by the ``recall_handle`` of its receipt;
        return its message id. Raises DelayedMessageNotFound once it was delivered or recalled."""
        request = pb.RecallMessageRequest(topic=topic, recall_handle=recall_handle)
        return str(self._call("RecallMessage", request).message_id)

    def create_topic(
        self, name: str, queues: int = 4, *, retention: float | None = None, message_type: str | None = None
    ) -> bool:
        """Create a topic; True if created, False if it already existed with ``queues`` queues and
        ``message_type``. ``retention`` (seconds; 0 keeps everything) is set on it, new or not;
        None follows the broker's for a new topic and leaves an existing one's as it is.
        ``message_type`` (NORMAL, FIFO, DELAY or TRANSACTION) makes it accept that type only."""
        topic = pb.Topic(name=name, queues=queues, retention_seconds=retention, message_type=message_type or "")
        response = self._call("CreateTopic", pb.CreateTopicRequest(topic=topic))
        return bool(response.created)
