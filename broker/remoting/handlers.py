"""halfmq's remoting broker: RocketMQ's classic clients send, end transactions, answer checks,
pull and keep offsets here, through the same services as every other front end.

A producer's heartbeat registers each of its producer groups as a check session on the
connection it came over; checks then go down that connection as one-way
CHECK_TRANSACTION_STATE requests, and the producer answers with a one-way END_TRANSACTION.
RocketMQ names a transaction by its message id (``UNIQ_KEY``), and so does this front end.

A consumer that fails a message sends it back (CONSUMER_SEND_MSG_BACK): a copy goes to the
group's retry topic, due after the delay level asked for (else level 3 plus the times it was
consumed again, as RocketMQ's broker does), or to its dead-letter topic once it was consumed
again as often as the consumer allows (its ``maxReconsumeTimes``, else the group's retry policy).
A consumer group's retry topic is made at its first heartbeat, as RocketMQ's broker makes it,
so its members subscribe to it. A consumer's own send to that topic (its fallback, and an
orderly consumer's way to give up on a message) goes to the dead-letter topic instead once
consumed again more often than allowed, or at once while the group holds queue locks.

Orderly consumers lock their queues (LOCK_BATCH_MQ) before reading them, and renew the locks.

A pull is filtered by the subscription it carries, else by the one its group's heartbeats
registered for the topic (a push consumer's pulls carry none): TAG or SQL92 expressions, the
latter checked beforehand by the consumer's CHECK_CLIENT_CONFIG.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from broker import errors
from broker.clients import CONSUMER, PRODUCER, Client
from broker.clock import Clock, to_ms
from broker.messaging import MessagingService
from broker.model import MAX_PULL, Message, Resolution, Source, StoredMessage
from broker.remoting import messages
from broker.remoting.codes import Request, Response
from broker.remoting.frame import ONEWAY, Command
from broker.remoting.namesrv import AUTO_CREATE_TOPIC, BROKER_NAME
from broker.remoting.server import Connection, Handler
from broker.remoting.session import RemotingSession
from broker.remoting.status import code_of
from broker.retry import DELIVERY_ATTEMPTS, RETRY_PREFIX, dead_letter_topic, origin_of, retry_topic
from broker.rocketmq.delays import DELAY_LEVELS
from broker.rocketmq.filters import TAG, Filter, compile_filter
from broker.rocketmq.locks import Queue, QueueLocks
from broker.rocketmq.properties import added_by_broker
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService

log = logging.getLogger(__name__)

# SendMessageRequestHeaderV2's one-letter names for SendMessageRequestHeader's fields.
V2_FIELDS = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
    "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}  # fmt: skip
END_TYPES = {0x8: Resolution.COMMIT, 0xC: Resolution.ROLLBACK, 0x0: Resolution.UNKNOWN}
PULL_COMMIT_OFFSET = 0x1  # PullSysFlag: the pull carries the group's offset to commit
PULL_SUSPEND = 0x2  # wait for messages when there are none
PULL_SUBSCRIPTION = 0x4  # the pull carries the subscription to filter by
_POLL = 0.1  # seconds between looks at an empty queue during long polling
_DEFAULT_QUEUES = 4  # DefaultMQProducer's defaultTopicQueueNums
_ENDS_KNOWN = 16384  # transactions prepared here whose END_TRANSACTION needs no lookup


class RemotingBroker:
    def __init__(
        self, messaging: MessagingService, transactions: TransactionService, registry: ProducerRegistry, *,
        auto_create_topics: bool, check_timeout: float, clock: Clock,
    ) -> None:  # fmt: skip
        self._messaging = messaging
        self._clock = clock
        self._transactions = transactions
        self._registry = registry
        self._auto_create_topics = auto_create_topics
        self._check_timeout = check_timeout
        self._sessions: dict[tuple[Connection, str], RemotingSession] = {}
        self._consumers: dict[str, dict[Connection, str]] = {}  # group: the client id on each connection
        # What the newest heartbeat said of each group (its consumerData), and each member
        # connection's client language and version: what the admin tools' connection list shows.
        self._consumer_data: dict[str, dict[str, Any]] = {}
        self._client_versions: dict[Connection, tuple[str, int]] = {}
        # (group, topic, queue): the next offset its last pull reached, as RocketMQ's broker keeps
        # it (its pull offset; the admin tools show what lies between it and the committed offset
        # as in flight). In memory, as there.
        self._pulled: dict[tuple[str, str, int], int] = {}
        # (group, topic): the filter its members' heartbeats subscribe with, or why it does not parse
        self._subscriptions: dict[tuple[str, str], Filter | errors.InvalidFilter] = {}
        self._notices: set[asyncio.Task[None]] = set()  # being written, held until they are
        self._locks = QueueLocks()
        # Message id: transaction id, of the transactions prepared here and not yet ended (the
        # newest _ENDS_KNOWN), so that their END_TRANSACTION goes to the writer without first
        # looking the transaction up by message id. Both ids are unique and never change.
        self._transaction_ids: OrderedDict[str, str] = OrderedDict()

    def handlers(self) -> dict[int, Handler]:
        return {
            Request.SEND_MESSAGE: self.send,
            Request.SEND_MESSAGE_V2: self.send,
            Request.SEND_BATCH_MESSAGE: self.send,
            Request.END_TRANSACTION: self.end_transaction,
            Request.HEART_BEAT: self.heartbeat,
            Request.UNREGISTER_CLIENT: self.unregister,
            Request.CONSUMER_SEND_MSG_BACK: self.send_back,
            Request.PULL_MESSAGE: self.pull,
            Request.LITE_PULL_MESSAGE: self.pull,
            Request.QUERY_CONSUMER_OFFSET: self.query_offset,
            Request.UPDATE_CONSUMER_OFFSET: self.update_offset,
            Request.GET_MAX_OFFSET: self.max_offset,
            Request.GET_MIN_OFFSET: self.min_offset,
            Request.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            Request.LOCK_BATCH_MQ: self.lock_queues,
            Request.UNLOCK_BATCH_MQ: self.unlock_queues,
            Request.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    async def send(self, request: Command, connection: Connection) -> Command:
        fields = request.fields
        if request.code != Request.SEND_MESSAGE:  # V2's one-letter names: batches are sent with them too
            fields = {V2_FIELDS.get(k, k): v for k, v in fields.items()}
        try:
            topic, group = fields["topic"], fields.get("producerGroup", "")
            queue_id, born = int(fields.get("queueId", "0")), int(fields.get("bornTimestamp", "0"))
        except (KeyError, ValueError) as exc:
            return request.answer(Response.MESSAGE_ILLEGAL, f"a send header without a valid {exc}")
        if request.code == Request.SEND_BATCH_MESSAGE:
            try:
                batch = list(messages.decode_batch(request.body))
            except ValueError as exc:
                return request.answer(Response.MESSAGE_ILLEGAL, str(exc))
        else:
            try:
                body = messages.uncompressed(request.body, int(fields.get("sysFlag", "0")))
            except ValueError as exc:
                return request.answer(Response.MESSAGE_ILLEGAL, str(exc))
            batch = [(body, messages.parse_properties(fields.get("properties", "")))]
        now_ms = to_ms(self._clock())
        try:
            reconsumed = int(fields.get("reconsumeTimes") or "0")
            sent = [
                messages.to_core(
                    topic,
                    body,
                    props,
                    born_timestamp=born,
                    queue_id=queue_id,
                    now_ms=now_ms,
                    reconsume_times=reconsumed,
                )
                for body, props in batch
            ]
        except ValueError as exc:
            return request.answer(Response.MESSAGE_ILLEGAL, f"a delay or reconsume count that is not a number: {exc}")
        prepared = [props.get(messages.TRANSACTION_PREPARED) == "true" for _, props in batch]
        if any(prepared) and len(batch) > 1:
            return request.answer(Response.MESSAGE_ILLEGAL, "a transactional message cannot be sent in a batch")
        try:
            await self._create_on_first_use(topic, fields)
            if topic.startswith(RETRY_PREFIX):
                sent = await self._retried(topic.removeprefix(RETRY_PREFIX), sent, reconsumed, fields)
            if any(prepared):
                txn = await self._transactions.prepare(sent[0], group, typed=False)
                self._transaction_ids[txn.message_id] = txn.transaction_id
                if len(self._transaction_ids) > _ENDS_KNOWN:
                    self._transaction_ids.popitem(last=False)
                return self._sent(
                    request, connection, topic, txn.queue_id, txn.half_offset, 1, transaction_id=txn.message_id
                )
            if len(sent) == 1:
                placed = [await self._messaging.send_one(sent[0], typed=False)]
            else:
                placed = await self._messaging.send(sent, typed=False)
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        return self._sent(request, connection, placed[0].topic, placed[0].queue_id, placed[0].queue_offset, len(placed))

    def _sent(
        self, request: Command, connection: Connection, topic: str, queue_id: int, queue_offset: int, count: int,
        transaction_id: str | None = None,
    ) -> Command:  # fmt: skip
        """SUCCESS with where the ``count`` messages sent went, each named by an offset message id.
        A delayed message is placed when due, so its offset is -1, as halfmq's other front ends say."""
        store_host = connection.local
        offset_ids = ",".join(
            messages.message_id(store_host, messages.position(topic, queue_id, queue_offset + i)) for i in range(count)
        )
        return request.answer(
            Response.SUCCESS,
            msgId=offset_ids,
            queueId=queue_id,
            queueOffset=queue_offset,
            transactionId=transaction_id,
            MSG_REGION="DefaultRegion",
            TRACE_ON=True,
        )

    async def _retried(self, group: str, sent: list[Message], reconsumed: int, fields: dict[str, str]) -> list[Message]:
        """A consumer's send to its group's retry topic, or to its dead-letter topic instead once
        consumed again more often than allowed, or while the group consumes in order (holds
        queue locks), as RocketMQ's broker redirects it."""
        if reconsumed <= await self._allowed(group, fields) and not self._locks.any_live(group, self._clock()):
            return sent
        letters = dead_letter_topic(group)
        await self._messaging.create_group_topic(letters)
        return [dataclasses.replace(m, topic=letters, deliver_at=None, queue_id=0) for m in sent]

    async def _allowed(self, group: str, fields: dict[str, str]) -> int:
        """How often a message may be consumed again: the consumer's ``maxReconsumeTimes``, else
        the group's retry policy's. Raises ValueError for a maximum that is not a number."""
        most = fields.get("maxReconsumeTimes")
        return int(most) if most else (await self._messaging.retry_policy(group)).max_attempts - 1

    async def _create_on_first_use(self, topic: str, fields: dict[str, str]) -> None:
        """Create a topic a producer names first, as RocketMQ's broker does when the producer sent
        with the auto-create key topic as its default topic (and auto-creation is on)."""
        if not self._auto_create_topics or fields.get("defaultTopic") != AUTO_CREATE_TOPIC:
            return
        try:
            self._messaging.topic(topic)
        except errors.TopicNotFound:
            queues = int(fields.get("defaultTopicQueueNums") or _DEFAULT_QUEUES)
            with contextlib.suppress(errors.TopicExists):  # another producer's first send made it
                await self._messaging.create_topic(topic, queues, None, None)

    async def end_transaction(self, request: Command, connection: Connection) -> Command | None:
        """End a transaction (the client sends it one-way: the answer is for clients that wait)."""
        fields = request.fields
        resolution = END_TYPES.get(int(fields.get("commitOrRollback", "-1") or "-1"))
        if resolution is None:
            return request.answer(Response.SYSTEM_ERROR, f"commitOrRollback {fields.get('commitOrRollback')} is no end")
        group, from_check = fields.get("producerGroup", ""), fields.get("fromTransactionCheck") == "true"
        message_id = fields.get("msgId", "")
        try:
            transaction_id = self._transaction_ids.get(message_id)
            if transaction_id is None:
                transaction_id = (await self._transactions.transaction_of_message(message_id)).transaction_id
            if from_check:
                self._registry.answered(transaction_id)
                await self._transactions.answer_check(transaction_id, group, resolution)
            elif resolution is not Resolution.UNKNOWN:
                await self._transactions.end(transaction_id, group, resolution, Source.CLIENT)
            if resolution is not Resolution.UNKNOWN:
                self._transaction_ids.pop(message_id, None)
        except errors.HalfmqError as exc:
            log.info("END_TRANSACTION of %s from %s refused: %s", message_id, connection.peer, exc)
            return request.answer(code_of(exc), str(exc))
        return request.answer(Response.SUCCESS)

    async def heartbeat(self, request: Command, connection: Connection) -> Command:
        """Register the client's producer groups as check sessions and its consumer groups'
        membership, both for as long as the connection lasts."""
        try:
            data = json.loads(request.body)
            client_id = str(data.get("clientID", ""))
            producers = [str(p["groupName"]) for p in data.get("producerDataSet") or []]
            consumer_data = {str(c["groupName"]): dict(c) for c in data.get("consumerDataSet") or []}
            consumers = list(consumer_data)
            subscriptions = {
                (str(c["groupName"]), str(s["topic"])): _compiled(s)
                for c in data.get("consumerDataSet") or []
                for s in c.get("subscriptionDataSet") or []
            }
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"a heartbeat that does not parse: {exc}")
        self._subscriptions.update(subscriptions)
        self._consumer_data.update(consumer_data)
        if consumers:
            self._client_versions[connection] = (request.language, request.version)
        for group in producers:
            if (connection, group) not in self._sessions:
                self._open_session(group, client_id, connection)
        for group in consumers:
            if group not in self._consumers:
                try:
                    await self._messaging.create_group_topic(retry_topic(group))
                except errors.HalfmqError as exc:
                    return request.answer(code_of(exc), str(exc))
            members = self._consumers.setdefault(group, {})
            if connection not in members:
                members[connection] = client_id
                connection.on_close.append(functools.partial(self._leave, group, connection))
                self._notify(group)
        return request.answer(Response.SUCCESS)

    def clients(self) -> Iterator[Client]:
        """The producer and consumer groups each connection's heartbeats named."""
        for (connection, group), session in self._sessions.items():
            yield Client("remoting", group, PRODUCER, session.client_id, connection.peer)
        for group in self._consumers:
            yield from self._members(group)

    def readers(self, group: str, topic: str) -> Iterator[Client]:
        """The group's members, if the group's subscription (what their heartbeats name) has the
        topic, as RocketMQ keeps one subscription per group."""
        if (group, topic) in self._subscriptions:
            yield from self._members(group)

    def _members(self, group: str) -> Iterator[Client]:
        for connection, client_id in self._consumers.get(group, {}).items():
            yield Client("remoting", group, CONSUMER, client_id, connection.peer)

    def forget_group(self, group: str) -> bool:
        """Drop the deleted group's pull offsets, as RocketMQ's broker does (removeOffset); they
        alone do not make a group known, so: False."""
        self._drop_pulled(lambda g, _: g == group)
        return False

    def forget_topic(self, topic: str) -> None:
        """Drop every group's pull offsets in the deleted topic, as RocketMQ's broker does
        (cleanOffsetByTopic)."""
        self._drop_pulled(lambda _, t: t == topic)

    def _drop_pulled(self, dropped: Callable[[str, str], bool]) -> None:
        for key in [key for key in self._pulled if dropped(key[0], key[1])]:
            del self._pulled[key]

    def pull_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The next offset the group's last pull of the queue reached, None if none pulled it."""
        return self._pulled.get((group, topic, queue_id))

    def connections(self, group: str) -> dict[str, Any] | None:
        """The group's live consumers as RocketMQ's ConsumerConnection (GET_CONSUMER_CONNECTION_LIST):
        each member's client id, address, language and version, and what its heartbeats said of
        the group; None while it has none."""
        members = self._consumers.get(group)
        if not members:
            return None
        data = self._consumer_data.get(group, {})
        connections = []
        for connection, client_id in members.items():
            language, version = self._client_versions.get(connection, ("JAVA", 0))
            connections.append({"clientAddr": connection.peer, "clientId": client_id, "language": language,
                                "version": version})  # fmt: skip
        return {
            "connectionSet": connections,
            "consumeFromWhere": data.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"),
            "consumeType": data.get("consumeType", "CONSUME_PASSIVELY"),
            "messageModel": data.get("messageModel", "CLUSTERING"),
            "subscriptionTable": {str(s.get("topic")): s for s in data.get("subscriptionDataSet") or []},
        }

    def _leave(self, group: str, connection: Connection) -> None:
        members = self._consumers.get(group, {})
        if members.pop(connection, None) is None:
            return
        if not any(connection in m for m in self._consumers.values()):
            self._client_versions.pop(connection, None)
        if members:
            self._notify(group)
        else:
            self._consumers.pop(group, None)
            self._consumer_data.pop(group, None)
            for key in [key for key in self._subscriptions if key[0] == group]:
                del self._subscriptions[key]

    def _notify(self, group: str) -> None:
        """Tell the group's members its membership changed (one way, as RocketMQ's broker does), so
        they rebalance now rather than at their next periodic rebalance."""
        for member in self._consumers.get(group, {}):
            notice = Command(code=Request.NOTIFY_CONSUMER_IDS_CHANGED, flag=ONEWAY, fields={"consumerGroup": group})
            task = asyncio.create_task(member.send(notice))
            self._notices.add(task)
            task.add_done_callback(self._sent_notice)

    def _sent_notice(self, task: asyncio.Task[None]) -> None:
        """A notice written, or not: a member whose connection closed meanwhile needs none."""
        self._notices.discard(task)
        if not task.cancelled():
            task.exception()

    def _open_session(self, group: str, client_id: str, connection: Connection) -> None:
        session = RemotingSession(group, client_id, connection, store_host=connection.local,
                                  broker_name=BROKER_NAME, write_timeout=self._check_timeout)  # fmt: skip
        writer = asyncio.create_task(session.outbox.run())
        self._sessions[(connection, group)] = session
        self._registry.register(session)

        def close() -> None:
            self._sessions.pop((connection, group), None)
            self._registry.unregister(session)
            writer.cancel()

        connection.on_close.append(close)

    async def check_client_config(self, request: Command, connection: Connection) -> Command:
        """Whether the broker takes a consumer's subscription: a consumer filtering by SQL92 asks
        before it starts, and does not start if refused."""
        try:
            subscription = json.loads(request.body).get("subscriptionData") or {}
            compiled = _compiled(subscription)
        except (ValueError, AttributeError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"a client config that does not parse: {exc}")
        if isinstance(compiled, errors.InvalidFilter):
            return request.answer(Response.SUBSCRIPTION_PARSE_FAILED, str(compiled))
        return request.answer(Response.SUCCESS)

    async def unregister(self, request: Command, connection: Connection) -> Command:
        fields = request.fields
        session = self._sessions.pop((connection, fields.get("producerGroup", "")), None)
        if session is not None:
            self._registry.unregister(session)
        if fields.get("consumerGroup"):
            self._leave(fields["consumerGroup"], connection)
        return request.answer(Response.SUCCESS)

    async def pull(self, request: Command, connection: Connection) -> Command:
        fields = request.fields
        try:
            group, topic = fields["consumerGroup"], fields["topic"]
            queue_id, offset = int(fields["queueId"]), int(fields["queueOffset"])
            most = max(1, min(int(fields.get("maxMsgNums", "32")), MAX_PULL))
            flags = int(fields.get("sysFlag", "0"))
            suspend_ms = int(fields.get("suspendTimeoutMillis", "0"))
        except (KeyError, ValueError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"a pull header without a valid {exc}")
        wanted = self._subscriptions.get((group, topic))
        if flags & PULL_SUBSCRIPTION or wanted is None:
            wanted = _compiled(fields)
        if isinstance(wanted, errors.InvalidFilter):
            return request.answer(Response.SUBSCRIPTION_PARSE_FAILED, str(wanted))
        deadline = time.monotonic() + (suspend_ms / 1000 if flags & PULL_SUSPEND else 0)
        try:
            if flags & PULL_COMMIT_OFFSET and int(fields.get("commitOffset", "-1")) >= 0:
                await self._messaging.commit_consumer_offset(group, topic, queue_id, int(fields["commitOffset"]))
            try:
                pulled = await self._messaging.pull(topic, queue_id, offset, most)
            except errors.OffsetOutOfRange:  # below the queue's low offset: retention deleted it
                low, high = (await self._messaging.queue_offsets(topic)).get(queue_id, (0, 0))
                return _offset_moved(request, offset, low, high)
            if _moved(offset, pulled.min_offset, pulled.max_offset) is not None:
                return _offset_moved(request, offset, pulled.min_offset, pulled.max_offset)
            while not pulled.messages and time.monotonic() + _POLL < deadline:
                await asyncio.sleep(_POLL)
                pulled = await self._messaging.pull(topic, queue_id, offset, most)
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        self._pulled[(group, topic, queue_id)] = pulled.next_offset
        kept = [m for m in pulled.messages if wanted.admits(m.tags, m.properties)]
        ranges: dict[str, Any] = {"suggestWhichBrokerId": 0, "nextBeginOffset": pulled.next_offset,
                                  "minOffset": pulled.min_offset, "maxOffset": pulled.max_offset}  # fmt: skip
        if kept:
            body = b"".join(stored_bytes(m, connection.local) for m in kept)
            return request.answer(Response.SUCCESS, "FOUND", body, **ranges)
        if pulled.messages:
            return request.answer(Response.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", **ranges)
        return request.answer(Response.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", **ranges)

    async def send_back(self, request: Command, connection: Connection) -> Command:
        """Retry a message the consumer failed later, or dead-letter it, as RocketMQ's broker does
        (``AbstractSendMessageProcessor.consumerSendMsgBack``)."""
        fields = request.fields
        try:
            group, origin_id = fields["group"], fields.get("originMsgId", "")
            offset, level = int(fields["offset"]), int(fields.get("delayLevel", "0"))
        except (KeyError, ValueError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"a send-back header without a valid {exc}")
        try:
            message = await self._consumed(group, fields.get("originTopic", ""), offset, origin_id)
            if message is None:
                return request.answer(Response.SYSTEM_ERROR, f"look message by offset failed, {offset}")
            reconsumed = int(message.properties.get(DELIVERY_ATTEMPTS, "0"))
            delay = None
            if reconsumed < await self._allowed(group, fields) and level >= 0:
                delay = DELAY_LEVELS[min(level or 3 + reconsumed, len(DELAY_LEVELS)) - 1]
            await self._messaging.send_back(group, message, reconsumed + 1, delay)
        except ValueError as exc:  # its maxReconsumeTimes
            return request.answer(Response.SYSTEM_ERROR, f"a send-back header without a valid {exc}")
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        return request.answer(Response.SUCCESS)

    async def _consumed(self, group: str, origin_topic: str, offset: int, origin_id: str) -> StoredMessage | None:
        """The message a consumer of ``group`` read at ``offset`` (its position): in the topic it
        was sent to, or, for a retry, in the group's retry topic; None unless its first message id
        is ``origin_id``."""
        retried, queue_id, queue_offset = messages.place(offset)
        topic = retry_topic(group) if retried else origin_topic
        with contextlib.suppress(errors.TopicNotFound, errors.OffsetOutOfRange, errors.InvalidArgument):
            found = (await self._messaging.pull(topic, queue_id, queue_offset, 1)).messages
            if found and found[0].queue_offset == queue_offset and origin_of(found[0])[1] == origin_id:
                return found[0]
        return None

    async def query_offset(self, request: Command, connection: Connection) -> Command:
        """The group's committed offset of the queue. With none, RocketMQ's broker answers 0 for a
        queue that still holds its first message (unless asked not to), else (an empty queue
        too) QUERY_NOT_FOUND."""
        fields = request.fields
        try:
            topic, queue_id = fields.get("topic", ""), int(fields.get("queueId", "-1"))
            committed = await self._messaging.consumer_offsets(fields.get("consumerGroup", ""), topic)
            low, high = (await self._messaging.queue_offsets(topic)).get(queue_id, (-1, -1))
        except (errors.HalfmqError, ValueError) as exc:
            return request.answer(Response.SYSTEM_ERROR, str(exc))
        if queue_id in committed:
            return request.answer(Response.SUCCESS, offset=committed[queue_id])
        if low == 0 < high and fields.get("setZeroIfNotFound") != "false":
            return request.answer(Response.SUCCESS, offset=0)
        return request.answer(Response.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first")

    async def update_offset(self, request: Command, connection: Connection) -> Command:
        fields = request.fields
        try:
            await self._messaging.commit_consumer_offset(
                fields.get("consumerGroup", ""), fields.get("topic", ""), int(fields.get("queueId", "-1")),
                int(fields.get("commitOffset", "-1")),
            )  # fmt: skip
        except (errors.HalfmqError, ValueError) as exc:
            return request.answer(Response.SYSTEM_ERROR, str(exc))
        return request.answer(Response.SUCCESS)

    async def max_offset(self, request: Command, connection: Connection) -> Command:
        return await self._queue_end(request, high=True)

    async def min_offset(self, request: Command, connection: Connection) -> Command:
        return await self._queue_end(request, high=False)

    async def _queue_end(self, request: Command, *, high: bool) -> Command:
        try:
            topic, queue_id = request.fields.get("topic", ""), int(request.fields.get("queueId", "-1"))
            ends = (await self._messaging.queue_offsets(topic))[queue_id]
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        except (KeyError, ValueError):
            return request.answer(Response.SYSTEM_ERROR, f"no queue {request.fields.get('queueId')}")
        return request.answer(Response.SUCCESS, offset=ends[1] if high else ends[0])

    async def lock_queues(self, request: Command, connection: Connection) -> Command:
        """Lock for the client the queues it asks for that no other client of the group holds;
        answer those it holds now."""
        try:
            group, client_id, queues = _queues_of(request.body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"a lock request that does not parse: {exc}")
        held = self._locks.lock(group, client_id, queues, self._clock())
        locked = [{"topic": topic, "brokerName": BROKER_NAME, "queueId": queue_id} for topic, queue_id in held]
        return request.answer(Response.SUCCESS, body=json.dumps({"lockOKMQSet": locked}).encode())

    async def unlock_queues(self, request: Command, connection: Connection) -> Command:
        try:
            group, client_id, queues = _queues_of(request.body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"an unlock request that does not parse: {exc}")
        self._locks.unlock(group, client_id, queues)
        return request.answer(Response.SUCCESS)

    async def consumer_list(self, request: Command, connection: Connection) -> Command:
        """The client ids of the group's live consumers (their heartbeats' connections still open)."""
        members = sorted(set(self._consumers.get(request.fields.get("consumerGroup", ""), {}).values()))
        if not members:
            return request.answer(Response.SYSTEM_ERROR, f"no consumer of group {request.fields.get('consumerGroup')}")
        return request.answer(Response.SUCCESS, body=json.dumps({"consumerIdList": members}).encode())


def stored_bytes(message: StoredMessage, store_host: tuple[str, int]) -> bytes:
    """A message as RocketMQ's store holds it (what a pull or a query answers); a copy sent back
    carries how many times it was consumed again in its own field, and its first message id."""
    properties = {**message.properties, **added_by_broker(message), **messages.system_properties(message)}
    reconsumed = int(properties.pop(DELIVERY_ATTEMPTS, "0"))
    properties[messages.UNIQ_KEY] = origin_of(message)[1]
    return messages.encode(message, store_host=store_host, properties=properties, reconsume_times=reconsumed)


def _queues_of(body: bytes) -> tuple[str, str, list[Queue]]:
    """The group, client and queues of a LockBatchRequestBody or UnlockBatchRequestBody."""
    data = json.loads(body)
    queues = [(str(mq["topic"]), int(mq["queueId"])) for mq in data.get("mqSet") or []]
    return str(data["consumerGroup"]), str(data["clientId"]), queues


def _offset_moved(request: Command, offset: int, low: int, high: int) -> Command:
    return request.answer(Response.PULL_OFFSET_MOVED, "OFFSET_MOVED", suggestWhichBrokerId=0,
                          nextBeginOffset=_moved(offset, low, high), minOffset=low, maxOffset=high)  # fmt: skip


def _moved(offset: int, low: int, high: int) -> int | None:
    """Where a pull from ``offset`` must start instead, as RocketMQ's store answers OFFSET_MOVED:
    0 in an empty queue, its low offset below it, its end past it; None when ``offset`` is fine."""
    if low == high:
        return None if offset == low else low
    if offset < low:
        return low
    return high if offset > high else None


def _compiled(subscription: dict[str, Any]) -> Filter | errors.InvalidFilter:
    """The filter a subscription (a pull header's or a heartbeat's) names, or why it does not
    parse: its ``subString``, or a pull's ``subscription``, of ``expressionType``."""
    expression = subscription.get("subString", subscription.get("subscription"))
    try:
        return compile_filter(str(subscription.get("expressionType") or TAG), str(expression or "*"))
    except errors.InvalidFilter as exc:
        return exc
