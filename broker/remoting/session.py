"""A remoting producer's connection as a check session: checks go down it as one-way
CHECK_TRANSACTION_STATE requests, through the session's bounded outbox."""

from __future__ import annotations

import asyncio
import itertools

from broker.model import StoredMessage
from broker.remoting import messages
from broker.remoting.codes import Request
from broker.remoting.frame import ONEWAY, Command
from broker.remoting.server import Connection
from broker.rocketmq.properties import TRANSACTION_ID
from broker.transaction.outbox import Check, CheckRequest, Outbox

_OPAQUES = itertools.count(1 << 30)  # apart from the clients' own, which count up from 0


class RemotingSession:
    """One producer group of one client, on the connection its heartbeat came over."""

    def __init__(
        self, producer_group: str, client_id: str, connection: Connection, *, store_host: tuple[str, int],
        broker_name: str, write_timeout: float,
    ) -> None:  # fmt: skip
        self.producer_group = producer_group
        self.client_id = client_id
        self.connection = connection
        self._store_host = store_host
        self._broker_name = broker_name
        self.outbox = Outbox(self._write, write_timeout=write_timeout, on_stuck=connection.close)

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        return self.outbox.offer(check)

    async def _write(self, request: CheckRequest) -> None:
        message = request.message
        position = messages.position(message.topic, message.queue_id, message.queue_offset)
        await self.connection.send(
            Command(
                code=Request.CHECK_TRANSACTION_STATE,
                opaque=next(_OPAQUES),
                flag=ONEWAY,
                fields={
                    "topic": message.topic,
                    "tranStateTableOffset": str(message.queue_offset),
                    "commitLogOffset": str(position),
                    "msgId": message.message_id,
                    "transactionId": message.message_id,  # RocketMQ names a transaction by its message id
                    "offsetMsgId": messages.message_id(self._store_host, position),
                    "brokerName": self._broker_name,
                },
                body=self._encode(message),
            )
        )

    def _encode(self, message: StoredMessage) -> bytes:
        properties = {
            **message.properties,
            **messages.system_properties(message),
            TRANSACTION_ID: message.message_id,  # as RocketMQ's half message carries it
            messages.TRANSACTION_PREPARED: "true",
            messages.PRODUCER_GROUP: self.producer_group,
        }
        return messages.encode(message, store_host=self._store_host, properties=properties, sys_flag=messages.PREPARED)
