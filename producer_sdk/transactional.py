"""Kafka-model transactional producers: messages to any topics and consumer offsets, committed
all together or aborted all together; a producer started with the same ``transactional_id``
fences this one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Self

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._batcher import Batcher
from producer_sdk._blocking import Closing
from producer_sdk._client import BrokerClient, TlsCa, message_to_pb, receipt_from_pb
from producer_sdk._loop import sdk_loop
from producer_sdk.errors import BrokerUnavailable, InvalidTxnState, ProducerFenced, TransactionAborted
from producer_sdk.message import Message, SendReceipt

Offsets = Mapping[tuple[str, int], int]  # (topic, queue id) -> the group's next offset of the queue


class AsyncKafkaTransactionProducer:
    """Asyncio Kafka-model transactional producer; use as ``async with``.

    ``begin_transaction``, then any number of ``send`` and ``send_offsets_to_transaction``, then
    ``commit_transaction`` or ``abort_transaction`` (or ``async with p.transaction():``). Sends
    made concurrently go to the broker together; an end waits for the sends still in flight.
    Messages are stored as they are sent and become visible, with the offsets, only when the
    transaction commits. ``transaction_timeout``: seconds a transaction may stay open before the
    broker aborts it (Kafka's ``transaction.timeout.ms``).
    Starting a producer with the same ``transactional_id`` aborts this one's open transaction,
    and every later call of this one raises ProducerFenced.
    """

    def __init__(
        self,
        *,
        transactional_id: str,
        broker: str,
        transaction_timeout: float = 60.0,
        timeout: float = 10.0,
        token: str | None = None,
        tls_ca: TlsCa = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.broker = broker
        self.transaction_timeout = transaction_timeout
        self._timeout = timeout
        self._token = token
        self._tls_ca = tls_ca
        self._client: BrokerClient | None = None
        self._epoch = 0
        self._last = 0  # the number of the id's last transaction the broker knows of
        self._open = False
        self._stored = False  # whether the broker holds anything of the open transaction
        self._fenced: ProducerFenced | None = None
        self._sending: set[asyncio.Task[SendReceipt]] = set()  # sends of the open transaction in flight

    @property
    def epoch(self) -> int:
        """The producer epoch the broker handed this producer."""
        return self._epoch

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (begun, and not ended, fenced or aborted by the broker)."""
        return self._open

    async def start(self) -> None:
        """Take the transactional id: abort its open transaction, fence the producer that held it."""
        self._client = BrokerClient(self.broker, timeout=self._timeout, token=self._token, tls_ca=self._tls_ca)
        self._sends: Batcher[pb.Message, pb.SendResult] = Batcher(self._send_all, _byte_size)
        try:
            request = pb.InitTransactionsRequest(
                transactional_id=self.transactional_id, transaction_timeout_seconds=self.transaction_timeout
            )
            response = await self._client.call("InitTransactions", request)
        except BaseException:
            await self._client.close()
            raise
        self._epoch, self._last = response.epoch, response.txn_number

    async def close(self) -> None:
        """Close the connection; a transaction still open is aborted by the broker after its timeout."""
        if self._client is not None:
            await self._client.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def begin_transaction(self) -> None:
        """Begin a transaction (nothing is sent until its first send or offsets)."""
        self._usable()
        if self._open:
            raise InvalidTxnState("a transaction is open already: commit or abort it first")
        self._open, self._stored = True, False

    def send(self, msg: Message) -> asyncio.Task[SendReceipt]:
        """Store ``msg`` in the open transaction; it becomes visible when the transaction commits.
        The message is on its way when this returns: await the task for its receipt (an end of
        the transaction waits for it in any case). Call it on the producer's event loop."""
        self._in_transaction("send")
        sent = asyncio.ensure_future(self._send(message_to_pb(msg)))
        self._sending.add(sent)
        sent.add_done_callback(self._sending.discard)
        return sent

    async def _send(self, message: pb.Message) -> SendReceipt:
        return receipt_from_pb(await self._sends.submit(message))

    async def send_offsets_to_transaction(self, offsets: Offsets, group: str) -> None:
        """Commit consumer group ``group``'s next offsets (``{(topic, queue_id): offset}``) with the
        open transaction: written if it commits, dropped if it aborts."""
        self._in_transaction("send_offsets_to_transaction")
        request = pb.SendOffsetsToTransactionRequest(
            txn=self._ref(),
            consumer_group=group,
            offsets=[pb.OffsetInTransaction(topic=t, queue_id=q, offset=o) for (t, q), o in offsets.items()],
        )
        await self._call("SendOffsetsToTransaction", request)

    async def commit_transaction(self) -> None:
        """Make every message and offset of the open transaction visible, together."""
        await self._end(commit=True)

    async def abort_transaction(self) -> None:
        """Delete every message and offset of the open transaction."""
        await self._end(commit=False)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Self]:
        """A transaction around the block: committed when it ends, aborted if it raises."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if self._open:  # not if the failure ended it (fenced, aborted by the broker)
                await self.abort_transaction()
            raise
        await self.commit_transaction()

    async def _end(self, *, commit: bool) -> None:
        self._in_transaction("commit_transaction" if commit else "abort_transaction")
        if self._sending:  # sends not awaited yet go first, as Kafka's commit flushes them
            await asyncio.gather(*self._sending, return_exceptions=True)
        if self._stored:
            await self._call("EndTxn", pb.EndTxnRequest(txn=self._ref(), commit=commit))
            self._last += 1
        self._open = False

    async def _send_all(self, messages: list[pb.Message]) -> list[Any]:
        request = pb.SendInTransactionRequest(txn=self._ref(), messages=messages)
        return list((await self._call("SendInTransaction", request)).results)

    async def _call(self, method: str, request: Any) -> Any:
        """Call the broker for the open transaction: it holds something of it from then on (even
        when the answer is lost). ProducerFenced is kept for every later call; TransactionAborted
        ends the transaction here too."""
        if self._client is None:
            raise BrokerUnavailable("the producer is not started")
        self._stored = True
        try:
            return await self._client.call(method, request)
        except ProducerFenced as exc:
            self._fenced, self._open = exc, False
            raise
        except TransactionAborted:
            self._open, self._last = False, self._last + 1
            raise

    def _ref(self) -> pb.TransactionRef:
        return pb.TransactionRef(transactional_id=self.transactional_id, epoch=self._epoch, txn_number=self._last + 1)

    def _usable(self) -> None:
        if self._fenced is not None:
            raise ProducerFenced(str(self._fenced), status=self._fenced.status)

    def _in_transaction(self, call: str) -> None:
        self._usable()
        if not self._open:
            raise InvalidTxnState(f"{call} needs an open transaction: call begin_transaction first")


class KafkaTransactionProducer(Closing):
    """Blocking twin of AsyncKafkaTransactionProducer; use as ``with``, or ``with p.transaction():``."""

    def __init__(
        self,
        *,
        transactional_id: str,
        broker: str,
        transaction_timeout: float = 60.0,
        timeout: float = 10.0,
        token: str | None = None,
        tls_ca: TlsCa = None,
    ) -> None:
        """Starts the producer: the transactional id is taken (and its previous holder fenced) here."""
        self._loop = sdk_loop()
        self._producer = AsyncKafkaTransactionProducer(
            transactional_id=transactional_id,
            broker=broker,
            transaction_timeout=transaction_timeout,
            timeout=timeout,
            token=token,
            tls_ca=tls_ca,
        )
        self._loop.run(self._producer.start())

    @property
    def transactional_id(self) -> str:
        return self._producer.transactional_id

    @property
    def epoch(self) -> int:
        return self._producer.epoch

    def close(self) -> None:
        self._loop.run(self._producer.close())

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def send(self, msg: Message) -> SendReceipt:
        return self._loop.run(_awaited(self._producer.send, msg))

    def send_offsets_to_transaction(self, offsets: Offsets, group: str) -> None:
        self._loop.run(self._producer.send_offsets_to_transaction(offsets, group))

    def commit_transaction(self) -> None:
        self._loop.run(self._producer.commit_transaction())

    def abort_transaction(self) -> None:
        self._loop.run(self._producer.abort_transaction())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Self]:
        """A transaction around the block: committed when it ends, aborted if it raises."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if self._producer.in_transaction:
                self.abort_transaction()
            raise
        self.commit_transaction()


async def _awaited(send: Callable[[Message], Awaitable[SendReceipt]], msg: Message) -> SendReceipt:
    """``send(msg)`` called and awaited on the loop that runs this."""
    return await send(msg)


def _byte_size(item: pb.Message) -> int:
    return int(item.ByteSize())
