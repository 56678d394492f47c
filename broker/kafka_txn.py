"""Kafka-model transactions: a producer holding a transactional id sends any number of messages to
any topics and queues, and consumer offsets, then commits them all or aborts them all.

``init`` hands the id's next epoch to a new producer and aborts what the id had open (the older
producer is fenced: its calls fail from then on). A transaction opens with its first send or
offsets; its messages are stored at once, invisible until it commits. One open longer than its
producer's timeout is aborted by ``run``'s sweep (Kafka's ``transaction.timeout.ms``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from broker.clock import Clock, system_clock, to_ms
from broker.errors import HalfmqError, InvalidArgument
from broker.messaging import MAX_BATCH, MessagingService
from broker.metrics import Metrics
from broker.model import (
    Message,
    MessageType,
    OffsetInTxn,
    ProducerEpoch,
    TransactionalId,
    TxnEnd,
    check_message,
    check_name,
    check_queue,
    check_type,
    queue_for,
)
from broker.ratelog import RateLimitedLog
from broker.store import Store

log = logging.getLogger(__name__)

MAX_TIMEOUT = 900.0  # seconds: the longest transaction timeout a producer may ask (Kafka's default cap)
SWEEP_INTERVAL = 0.5  # seconds between looks for transactions past their timeout


class KafkaTxnService:
    def __init__(
        self,
        store: Store,
        messaging: MessagingService,
        *,
        max_body_bytes: int,
        metrics: Metrics | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._messaging = messaging
        self._max_body_bytes = max_body_bytes
        self._clock = clock
        self._log = RateLimitedLog(log)

    async def init(self, transactional_id: str, timeout: float, held_epoch: int | None = None) -> ProducerEpoch:
        """Start a producer on ``transactional_id``: its epoch; the id's open transaction, if
        any, is aborted. ``timeout``: seconds a transaction may stay open (0 < t <= MAX_TIMEOUT).
        With ``held_epoch``, the producer holding that epoch bumps its own, after an error, as
        Kafka's KIP-360 lets it; raises ProducerFenced if a newer producer holds the id."""
        check_name("transactional id", transactional_id)
        if not 0 < timeout <= MAX_TIMEOUT:
            raise InvalidArgument(f"transaction timeout must be above 0 and at most {MAX_TIMEOUT:g} s, got {timeout}")
        started = await self._store.init_producer(transactional_id, to_ms(timeout), self.now_ms(), held_epoch)
        if started.aborted:
            self._count("fenced")
        return started

    async def send(
        self,
        transactional_id: str,
        epoch: int,
        txn_number: int,
        messages: Sequence[Message],
        queue_id: int | None = None,
    ) -> list[tuple[int, int]]:
        """Store ``messages`` in transaction ``txn_number`` of the id, all or none; each goes to
        the queue its message id picks, or all to ``queue_id`` when given. Returns each one's
        queue and offset. Raises, naming the message, the error a plain send would get;
        ProducerFenced, InvalidTxnState or TransactionAborted for a transaction that cannot take it."""
        check_name("transactional id", transactional_id)
        if not 1 <= len(messages) <= MAX_BATCH:
            raise InvalidArgument(f"a send holds 1 to {MAX_BATCH} messages, got {len(messages)}")
        placed = []
        for index, message in enumerate(messages):
            try:
                check_message(message, self._max_body_bytes)
                if message.deliver_at is not None:
                    raise InvalidArgument("a message in a transaction cannot be delayed")
                topic = self._store.topic(message.topic)
                check_type(topic, MessageType.NORMAL)
                queue = (
                    queue_for(message.message_id, topic.queues) if queue_id is None else check_queue(topic, queue_id)
                )
                placed.append((message, queue))
            except HalfmqError as exc:
                raise type(exc)(f"message {index}: {exc}") from None
        if len({(m.topic, m.message_id) for m in messages}) < len(messages):
            raise InvalidArgument("a message id appears twice in the send")
        return await self._store.send_in_txn(transactional_id, epoch, txn_number, placed, self.now_ms())

    async def send_offsets(
        self,
        transactional_id: str,
        epoch: int,
        txn_number: int,
        group: str,
        offsets: Sequence[OffsetInTxn],
        *,
        past_end: bool = False,
    ) -> None:
        """Commit ``group``'s next offsets with the transaction. Each must be within its queue
        (at most the queue's end), or any from 0 with ``past_end`` (see MessagingService.check_offset).
        Raises InvalidArgument, TopicNotFound, HiddenTopic, or as ``send``."""
        check_name("transactional id", transactional_id)
        check_name("consumer group", group)
        if not 1 <= len(offsets) <= MAX_BATCH:
            raise InvalidArgument(f"1 to {MAX_BATCH} offsets at a time, got {len(offsets)}")
        if len({(o.topic, o.queue_id) for o in offsets}) < len(offsets):
            raise InvalidArgument("a queue appears twice among the offsets")
        for item in offsets:
            await self._messaging.check_offset(item.topic, item.queue_id, item.offset, past_end=past_end)
        await self._store.add_offsets(transactional_id, epoch, txn_number, group, offsets, self.now_ms())

    async def end(self, transactional_id: str, epoch: int, txn_number: int, commit: bool) -> TxnEnd:
        """Commit or abort transaction ``txn_number``; see KafkaTxnStore.end_txn."""
        check_name("transactional id", transactional_id)
        ended = await self._store.end_txn(transactional_id, epoch, txn_number, commit, self.now_ms())
        if not ended.already_ended:
            self._count("committed" if commit else "aborted")
        return ended

    async def transactional_ids(self, transactional_id: str | None = None) -> list[TransactionalId]:
        """Every transactional id (or the one named; none if it was never initialised), with its
        epoch and its current or last transaction."""
        return await self._store.query(self._store.transactional_ids, transactional_id)

    async def open_queues(self, transactional_id: str) -> list[tuple[str, int]]:
        """The (topic, queue) pairs the id's open transaction wrote to; none if it has none open."""
        return await self._store.query(self._store.open_txn_queues, transactional_id)

    async def pending_groups(self) -> set[str]:
        """The consumer groups with offsets waiting in an open transaction."""
        return await self._store.query(self._store.txn_offset_groups)

    async def pending_offsets(self, group: str) -> set[tuple[str, int]]:
        """The (topic, queue) offsets of ``group`` that wait in an open transaction."""
        return await self._store.query(self._store.pending_txn_offsets, group)

    async def expire(self) -> tuple[int, int]:
        """Abort the transactions open longer than their timeout; return how many, and how many
        messages went. Looks on a reader first, so that a broker with none past its time writes nothing."""
        now_ms = self.now_ms()
        late = await self._store.query(self._store.open_txns_before, now_ms)
        if not late:
            return 0, 0
        aborted, deleted = await self._store.expire_txns(late, now_ms)
        self._count("timed_out", aborted)
        return aborted, deleted

    async def run(self) -> None:
        while True:
            try:
                aborted, deleted = await self.expire()
                if aborted:
                    log.warning("aborted %d transactions open over their timeout (%d messages)", aborted, deleted)
            except HalfmqError as exc:  # the store failed this time: try again next time
                self._log.warning(exc.code, "aborting timed-out transactions failed: %s", exc)
            await asyncio.sleep(SWEEP_INTERVAL)

    def _count(self, outcome: str, count: int = 1) -> None:
        if self._metrics is not None and count:
            self._metrics.transactions_ended(outcome, count)

    def now_ms(self) -> int:
        """The broker's clock, in ms."""
        return to_ms(self._clock())
