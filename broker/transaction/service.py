"""Prepare, commit, roll back, discard and resume half messages (docs/architecture.md, the
transaction flow, steps 1 and 3), and read them for operators.

Every change of a transaction's state goes through this service, which is where it is measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.clock import Clock, system_clock, to_ms
from broker.coalesce import Coalescer
from broker.errors import HalfmqError, InvalidArgument
from broker.messaging import MAX_BATCH
from broker.metrics import Metrics
from broker.model import (
    RESOLVED_STATE,
    CheckRecord,
    EndResult,
    Message,
    MessageType,
    Resolution,
    Source,
    StoredMessage,
    Transaction,
    TransactionState,
    check_message,
    check_message_id,
    check_name,
    check_transaction_id,
    check_type,
    merged,
    new_transaction_id,
    queue_of,
    type_of,
)
from broker.store import Store


class TransactionService:
    """The half-message service: the only way transactions are prepared and ended."""

    def __init__(self, store: Store, *, max_body_bytes: int, metrics: Metrics, clock: Clock = system_clock) -> None:
        self._store = store
        self._max_body_bytes = max_body_bytes
        self._metrics = metrics
        self._clock = clock
        # single prepares and ends arriving together are written as one batch each
        self._prepares = Coalescer(self._prepare_items, MAX_BATCH)
        self._ends = Coalescer(self.end_many, MAX_BATCH)

    async def prepare(self, message: Message, producer_group: str, *, typed: bool = True) -> Transaction:
        """Store ``message`` as a half message, invisible to consumers, and return its transaction.
        ``typed=False`` takes it whatever type its topic takes (``MessagingService.send``).

        A retried send with the same message id returns the original transaction.
        Raises InvalidArgument, MessageTooLarge, HiddenTopic, TopicNotFound or MessageIdInUse.
        """
        return await self._prepares.submit((message, producer_group, typed))

    async def prepare_many(
        self, items: Sequence[tuple[Message, str]], *, typed: bool = True
    ) -> list[Transaction | HalfmqError]:
        """``prepare`` for (message, producer group) items, stored in one write: each item gets its
        transaction or its own error. Raises only for a failure of the whole write."""
        return await self._prepare_items([(message, producer_group, typed) for message, producer_group in items])

    async def _prepare_items(self, items: Sequence[tuple[Message, str, bool]]) -> list[Transaction | HalfmqError]:
        now_ms = self._now_ms()
        results: list[Transaction | HalfmqError | None] = []
        valid: list[tuple[Message, str, int, str]] = []
        for message, producer_group, typed in items:
            try:
                check_message(message, self._max_body_bytes)
                check_name("producer group", producer_group)
                if type_of(message) is not MessageType.NORMAL:
                    raise InvalidArgument("a transactional message cannot be delayed nor have a message group")
                topic = self._store.topic(message.topic)
                if typed:
                    check_type(topic, MessageType.TRANSACTION)
                queues = topic.queues
            except HalfmqError as exc:
                results.append(exc)
                continue
            results.append(None)
            valid.append((message, producer_group, queue_of(message, queues), new_transaction_id()))
        return merged(results, await self._store.prepare_many(valid, now_ms) if valid else [])

    async def end_many(self, items: Sequence[tuple[str, str, Resolution, Source]]) -> list[EndResult | HalfmqError]:
        """``end`` for (transaction id, producer group, resolution, source) items, the resolutions
        written in one job, in order: each item gets its result or its own error."""
        results: list[EndResult | HalfmqError | None] = []
        resolving: list[tuple[str, TransactionState, str, str | None]] = []
        for transaction_id, producer_group, resolution, source in items:
            try:
                check_transaction_id(transaction_id)
                check_name("producer group", producer_group)
                if resolution is Resolution.UNKNOWN:  # nothing to write: the recorded state, for its owner
                    txn = await self._store.query(self._store.transaction, transaction_id)
                    txn.check_owner(producer_group)
                    results.append(
                        EndResult(state=txn.state, already_resolved=False, half_stored_at=txn.half_stored_at)
                    )
                    continue
            except HalfmqError as exc:
                results.append(exc)
                continue
            results.append(None)
            resolving.append((transaction_id, RESOLVED_STATE[resolution], source.value, producer_group))
        now_ms = self._now_ms()
        resolved = await self._store.resolve_many(resolving, now_ms) if resolving else []
        self._measure([r for r in resolved if isinstance(r, EndResult) and not r.already_resolved], now_ms)
        return merged(results, resolved)

    async def end(self, transaction_id: str, producer_group: str, resolution: Resolution, source: Source) -> EndResult:
        """Record the producer's resolution and return the recorded outcome.

        COMMIT makes the message visible in its real topic exactly once; ROLLBACK never does;
        UNKNOWN changes nothing (the check service will ask later). Repeating the recorded
        resolution is harmless. Raises InvalidArgument, TransactionNotFound,
        ProducerGroupMismatch or ResolutionConflict (naming the recorded outcome).
        """
        return await self._ends.submit((transaction_id, producer_group, resolution, source))

    async def transaction_of_message(self, message_id: str) -> Transaction:
        """The transaction of the half message with ``message_id`` (for a protocol whose clients
        name a transaction by its message id). Raises InvalidArgument or TransactionNotFound."""
        check_message_id(message_id)
        return await self._store.query(self._store.transaction_of_message, message_id)

    async def transactions(
        self, state: TransactionState | None, limit: int, offset: int
    ) -> tuple[list[Transaction], int]:
        """A page of the transactions in ``state`` (of every state with None), oldest half message
        first, and how many there are."""
        return await self._store.query(self._store.list_transactions, state, limit, offset)

    async def transaction(self, transaction_id: str) -> Transaction:
        """Raises InvalidArgument or TransactionNotFound."""
        check_transaction_id(transaction_id)
        return await self._store.query(self._store.transaction, transaction_id)

    async def detail(self, transaction_id: str) -> tuple[Transaction, StoredMessage, list[CheckRecord]]:
        """A transaction, its half message and every check delivered for it, read in one snapshot.
        Raises InvalidArgument or TransactionNotFound."""
        check_transaction_id(transaction_id)

        def read() -> tuple[Transaction, StoredMessage, list[CheckRecord]]:
            with self._store.snapshot():
                txn = self._store.transaction(transaction_id)
                return txn, self._store.half_message(txn), self._store.checks_of(transaction_id)

        return await self._store.query(read)

    async def pending_count(self) -> int:
        """How many half messages wait for their transaction's end."""
        return await self._store.query(self._store.pending_count)

    async def answer_check(self, transaction_id: str, producer_group: str, resolution: Resolution) -> EndResult:
        """A producer's answer to a check: counted by answer, then applied as ``end(source=CHECK)``."""
        self._metrics.check(f"answered_{resolution.value.lower()}")
        return await self.end(transaction_id, producer_group, resolution, Source.CHECK)

    async def operator_end(self, transaction_id: str, resolution: Resolution) -> EndResult:
        """An operator commits or rolls back a pending transaction, whatever its producer group."""
        check_transaction_id(transaction_id)
        if resolution not in RESOLVED_STATE:
            raise InvalidArgument("an operator can only COMMIT or ROLLBACK")
        return await self._resolve(transaction_id, RESOLVED_STATE[resolution], Source.OPERATOR, None)

    async def discard(self, transaction_id: str) -> EndResult:
        """Set a half message aside for good (check budget spent or too old): never delivered."""
        return await self._resolve(transaction_id, TransactionState.DISCARDED, Source.CHECK, None)

    async def resume(self, transaction_id: str) -> Transaction:
        """Make a discarded transaction pending again, with a fresh check budget and clock."""
        check_transaction_id(transaction_id)
        return await self._store.resume(transaction_id, self._now_ms())

    async def _resolve(
        self, transaction_id: str, target: TransactionState, source: Source, producer_group: str | None
    ) -> EndResult:
        now_ms = self._now_ms()
        result = await self._store.resolve(
            transaction_id, target, now_ms, source=source.value, producer_group=producer_group
        )
        if not result.already_resolved:
            self._measure([result], now_ms)
        return result

    def _measure(self, resolutions: Sequence[EndResult], now_ms: int) -> None:
        """Count new resolutions, each with the time since its half message was stored."""
        self._metrics.resolved([(r.state, (now_ms - r.half_stored_at) / 1000) for r in resolutions])

    def _now_ms(self) -> int:
        return to_ms(self._clock())
