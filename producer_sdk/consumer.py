"""A plain pull consumer of committed topics, with committed group offsets."""

from __future__ import annotations

import pyarrow as pa

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._blocking import BlockingClient
from producer_sdk._client import TlsCa, received_from_pb
from producer_sdk.columns import record_batch
from producer_sdk.message import PullResult, ReceivedMessage


class PullConsumer(BlockingClient):
    """Blocking consumer for one consumer ``group``; use as ``with``. ``tls_ca`` (the PEM file of
    the CA that signed the broker's certificate) turns TLS on."""

    def __init__(
        self, *, group: str, broker: str, timeout: float = 10.0, token: str | None = None, tls_ca: TlsCa = None
    ) -> None:
        super().__init__(broker=broker, timeout=timeout, token=token, tls_ca=tls_ca)
        self.group = group

    def queue_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """``{queue_id: (min_offset, max_offset)}``; max is one past the newest message."""
        response = self._call("GetQueueOffsets", pb.GetQueueOffsetsRequest(topic=topic))
        return {q.queue_id: (q.min_offset, q.max_offset) for q in response.queues}

    def pull(
        self, topic: str, *, queue_id: int, offset: int, max_messages: int = 32
    ) -> PullResult[list[ReceivedMessage]]:
        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        response = self._call("Pull", request)
        return PullResult(
            messages=[received_from_pb(m) for m in response.messages],
            next_offset=response.next_offset,
            min_offset=response.min_offset,
            max_offset=response.max_offset,
        )

    def pull_table(self, topic: str, *, queue_id: int, offset: int, max_messages: int = 1024) -> PullResult[pa.Table]:
        """``pull``, with the messages as a ``pyarrow.Table`` (for pandas, polars or DuckDB): the
        broker sends columns, and no Python object is made per message. Columns: topic, queue_id,
        queue_offset, message_id, transaction_id, keys, tags, properties (map), body,
        born_timestamp, store_timestamp."""

        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        response = self._call("PullColumns", request)
        return PullResult(
            messages=pa.Table.from_batches([record_batch(topic, queue_id, response)]),
            next_offset=response.next_offset,
            min_offset=response.min_offset,
            max_offset=response.max_offset,
        )

    def commit_offset(self, topic: str, *, queue_id: int, offset: int) -> None:
        """Record that the group has consumed ``topic``/``queue_id`` up to (not including) ``offset``."""
        request = pb.CommitConsumerOffsetRequest(
            consumer_group=self.group, topic=topic, queue_id=queue_id, offset=offset
        )
        self._call("CommitConsumerOffset", request)

    def committed_offsets(self, topic: str) -> dict[int, int]:
        request = pb.GetConsumerOffsetsRequest(consumer_group=self.group, topic=topic)
        response = self._call("GetConsumerOffsets", request)
        return dict(response.offsets)
