"""Transactional producers: send a half message, run the local transaction, commit or roll back."""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._blocking import Closing
from producer_sdk._client import ENDS, HALVES, BrokerClient, TlsCa, message_to_pb, received_from_pb
from producer_sdk._loop import sdk_loop
from producer_sdk._session import RESOLUTIONS, SessionLoop
from producer_sdk.errors import UNREACHABLE_HINT, BrokerError, BrokerUnavailable
from producer_sdk.listener import TransactionListener, await_listener, call_listener
from producer_sdk.message import LocalTransactionState, Message, TransactionSendResult, TransactionState

log = logging.getLogger(__name__)


class AsyncRocketMQTransactionProducer:
    """Asyncio transactional producer; use as ``async with``.

    Listener methods may be ``async def`` (awaited) or plain (run in a pool of
    ``check_threads`` threads). ``timeout`` bounds every call to the broker, retries included.
    ``token`` is the broker's shared auth token, if it has one. ``tls_ca`` (the PEM file of the
    CA that signed the broker's certificate) turns TLS on.

    Concurrent transactions share calls: half messages (and ends) that callers send while an
    earlier call is in flight go to the broker together in the next call, each with its own
    result. An idle producer sends at once; ``linger`` seconds of waiting buy bigger batches.
    """

    def __init__(
        self,
        *,
        group: str,
        broker: str,
        listener: TransactionListener,
        timeout: float = 10.0,
        check_threads: int = 4,
        client_id: str | None = None,
        token: str | None = None,
        linger: float = 0.0,
        tls_ca: TlsCa = None,
    ) -> None:
        self.group = group
        self._linger = linger
        self._token = token
        self._tls_ca = tls_ca
        self.broker = broker
        self.listener = listener
        self.client_id = client_id or f"{group}-{uuid.uuid4().hex[:12]}"
        self._timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=check_threads, thread_name_prefix="halfmq-check")
        self._client: BrokerClient | None = None
        self._session: SessionLoop | None = None
        self._session_task: asyncio.Task[None] | None = None

    @property
    def checks_received(self) -> int:
        """How many check requests the broker has sent this producer."""
        return self._session.checks_received if self._session else 0

    async def start(self) -> None:
        """Connect and open the session; raise BrokerUnavailable if that fails within ``timeout``,
        or InvalidArgument if the broker refuses the producer group."""
        self._client = BrokerClient(self.broker, timeout=self._timeout, token=self._token, tls_ca=self._tls_ca)
        self._halves = self._client.batcher(HALVES, linger=self._linger)
        self._ends = self._client.batcher(ENDS, linger=self._linger)
        self._session = SessionLoop(self._client, self.group, self.client_id, self._check)
        self._session_task = asyncio.create_task(self._session.run())
        connected = asyncio.create_task(self._session.connected.wait())
        await asyncio.wait([connected, self._session_task], timeout=self._timeout, return_when=asyncio.FIRST_COMPLETED)
        if not connected.done():
            connected.cancel()
            refused = self._session.refused
            await self.close()
            if refused is not None:
                raise refused
            raise BrokerUnavailable(
                f"no session with the broker at {self.broker} within {self._timeout:g} s; {UNREACHABLE_HINT}"
            )

    async def close(self) -> None:
        if self._session_task is not None:
            self._session_task.cancel()
            await asyncio.gather(self._session_task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._client is not None:
            await self._client.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> AsyncRocketMQTransactionProducer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end the transaction.

        Raises the typed error of a refused half message (nothing was stored then), or
        ResolutionConflict when the broker had already resolved the transaction differently.
        """
        transaction_id = await self._prepare(msg)
        local_state = await self._listen(self.listener.execute_local_transaction, msg, arg)
        return await self._end(msg, transaction_id, local_state)

    sendMessageInTransaction = send_message_in_transaction

    async def _prepare(self, msg: Message) -> str:
        """Store ``msg`` as a half message; return its transaction id."""
        self._connected_client()
        request = pb.SendHalfMessageRequest(message=message_to_pb(msg), producer_group=self.group)
        response = await self._halves.submit(request)
        return str(response.transaction_id)

    async def _end(
        self, msg: Message, transaction_id: str, local_state: LocalTransactionState
    ) -> TransactionSendResult:
        """Tell the broker the local outcome; the result holds the recorded state (None if the
        broker could not be reached: its checks will then resolve the transaction)."""
        request = pb.EndTransactionRequest(
            transaction_id=transaction_id,
            producer_group=self.group,
            resolution=RESOLUTIONS[local_state],
            source=pb.CLIENT,
        )
        state: TransactionState | None
        try:
            self._connected_client()
            response = await self._ends.submit(request)
            state = TransactionState[pb.TransactionState.Name(response.state)]
        except (BrokerUnavailable, BrokerError) as exc:  # e.g. a full disk: the half message is stored
            log.warning("end of transaction %s not confirmed (%s); the broker will check", transaction_id, exc)
            state = None
        return TransactionSendResult(
            message_id=msg.message_id, transaction_id=transaction_id, local_state=local_state, state=state
        )

    async def _check(self, check: pb.CheckRequest) -> LocalTransactionState:
        return await self._listen(self.listener.check_local_transaction, received_from_pb(check.message))

    async def _listen(self, method: Any, *args: Any) -> LocalTransactionState:
        if inspect.iscoroutinefunction(method):
            return await await_listener(method, *args)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call_listener, method, *args)

    def _connected_client(self) -> BrokerClient:
        if self._client is None:
            raise BrokerUnavailable("the producer is not started")
        return self._client


class RocketMQTransactionProducer(Closing):
    """Blocking producer of RocketMQ-model transactions (half messages, checked back); connects
    in its constructor, like every blocking producer; use as ``with``.

    ``execute_local_transaction`` runs in the calling thread; checks run in a pool of
    ``check_threads`` threads. Safe to share between threads. The constructor raises
    BrokerUnavailable if no session opens within ``timeout``.
    """

    _connects_at_once = True  # False only for the deprecated TransactionProducer, which waits for start()

    def __init__(
        self,
        *,
        group: str,
        broker: str,
        listener: TransactionListener,
        timeout: float = 10.0,
        check_threads: int = 4,
        client_id: str | None = None,
        token: str | None = None,
        linger: float = 0.0,
        tls_ca: TlsCa = None,
    ) -> None:
        self._loop = sdk_loop()
        self._producer = AsyncRocketMQTransactionProducer(
            group=group,
            broker=broker,
            listener=listener,
            timeout=timeout,
            check_threads=check_threads,
            client_id=client_id,
            token=token,
            linger=linger,
            tls_ca=tls_ca,
        )
        self.listener = listener
        if self._connects_at_once:
            self._loop.run(self._producer.start())

    @property
    def checks_received(self) -> int:
        return self._producer.checks_received

    def close(self) -> None:
        self._loop.run(self._producer.close())

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """As the async producer's send_message_in_transaction, with the local transaction in this thread."""
        transaction_id = self._loop.run(self._producer._prepare(msg))
        local_state = call_listener(self.listener.execute_local_transaction, msg, arg)
        return self._loop.run(self._producer._end(msg, transaction_id, local_state))

    sendMessageInTransaction = send_message_in_transaction


class TransactionProducer(RocketMQTransactionProducer):
    """Deprecated: RocketMQTransactionProducer, which connects in its constructor. This one
    connects in ``start()`` or at ``with``, as it did; it goes in the next release."""

    _connects_at_once = False

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn(
            "TransactionProducer is deprecated: use RocketMQTransactionProducer, which connects in its constructor",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(**kwargs)

    def start(self) -> None:
        self._loop.run(self._producer.start())

    def __enter__(self) -> TransactionProducer:
        self.start()
        return self
