"""Prepare, commit and roll back half messages (DESIGN section 2, steps 1 and 3)."""

from __future__ import annotations

import uuid
import zlib

from broker.clock import Clock, system_clock, to_ms
from broker.model import (
    RESOLVED_STATE,
    EndResult,
    Message,
    Resolution,
    Source,
    Transaction,
    check_message,
    check_name,
    check_transaction_id,
)
from broker.store import Store


def queue_for(message_id: str, queues: int) -> int:
    """The queue a message goes to: stable for a message id, spread evenly over the queues."""
    return zlib.crc32(message_id.encode()) % queues


class TransactionService:
    """The half-message service: the only way transactions are prepared and ended."""

    def __init__(self, store: Store, *, max_body_bytes: int, clock: Clock = system_clock) -> None:
        self._store = store
        self._max_body_bytes = max_body_bytes
        self._clock = clock

    async def prepare(self, message: Message, producer_group: str) -> Transaction:
        """Store ``message`` as a half message, invisible to consumers, and return its transaction.

        A retried send with the same message id returns the original transaction.
        Raises InvalidArgument, MessageTooLarge, HiddenTopic or TopicNotFound.
        """
        check_message(message, self._max_body_bytes)
        check_name("producer group", producer_group)
        topic = self._store.topic(message.topic)
        return await self._store.prepare(
            message, producer_group, queue_for(message.message_id, topic.queues), uuid.uuid4().hex, self._now_ms()
        )

    async def end(self, transaction_id: str, producer_group: str, resolution: Resolution, source: Source) -> EndResult:
        """Record the producer's resolution and return the recorded outcome.

        COMMIT makes the message visible in its real topic exactly once; ROLLBACK never does;
        UNKNOWN changes nothing (the check service will ask later). Repeating the recorded
        resolution is harmless. Raises InvalidArgument, TransactionNotFound,
        ProducerGroupMismatch or ResolutionConflict (naming the recorded outcome).
        """
        check_transaction_id(transaction_id)
        check_name("producer group", producer_group)
        if resolution is Resolution.UNKNOWN:
            txn = self._store.transaction(transaction_id)
            txn.check_owner(producer_group)
            return EndResult(state=txn.state, already_resolved=False)
        return await self._store.resolve(
            transaction_id,
            RESOLVED_STATE[resolution],
            self._now_ms(),
            source=source.value,
            producer_group=producer_group,
        )

    def _now_ms(self) -> int:
        return to_ms(self._clock())
