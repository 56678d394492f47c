"""The plain producer: normal (non-transactional) messages, one at a time or in batches."""

from __future__ import annotations

from collections.abc import Sequence

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._blocking import BlockingClient
from producer_sdk._client import SENDS, TlsCa, message_to_pb, receipt_from_pb
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
        request = pb.SendMessageRequest(message=message_to_pb(msg))
        return receipt_from_pb(self._loop.run(self._sends.submit(request)))

    def send_batch(self, msgs: Sequence[Message]) -> list[SendReceipt]:
        """Store all of ``msgs`` or none of them."""
        response = self._call("SendBatch", pb.SendBatchRequest(messages=[message_to_pb(m) for m in msgs]))
        return [receipt_from_pb(r) for r in response.results]

    def create_topic(self, name: str, queues: int = 4, *, retention: float | None = None) -> bool:
        """Create a topic; True if created, False if it already existed with ``queues`` queues.
        ``retention`` (seconds; 0 keeps everything) is set on it, new or not; None follows the
        broker's for a new topic and leaves an existing one's as it is."""
        topic = pb.Topic(name=name, queues=queues, retention_seconds=retention)
        response = self._call("CreateTopic", pb.CreateTopicRequest(topic=topic))
        return bool(response.created)
