"""Delayed (timed) messages, RocketMQ 5's DELAY type: held durably from the send until due, then
appended to their queue at a fresh offset, where every reader sees them (native pulls, the Spark
source, RocketMQ receives), never before. The timer reads only when the next one is due (an
index seek), so the messages waiting cost no memory and no work per tick whatever their number."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import replace

from broker.clock import Clock, system_clock, to_ms
from broker.errors import HalfmqError, InvalidArgument, InvalidDeliveryTime
from broker.model import DELIVER_AT, Message, Placement
from broker.ratelog import RateLimitedLog
from broker.store import Store

log = logging.getLogger(__name__)

TICK = 0.05  # seconds between looks at when the next delayed message is due, at most
STEP = 1000  # delayed messages delivered per write
_HANDLE = re.compile(r"(\d{1,18})\.(\d{1,15})")  # delay id . due time (ms)


def due_of(recall_handle: str) -> tuple[int, int]:
    """The delay id a recall handle names, and when its message is (or was) due, in broker ms.
    Raises InvalidArgument for a malformed handle."""
    named = _HANDLE.fullmatch(recall_handle)
    if named is None:
        raise InvalidArgument(f"malformed recall handle {recall_handle[:40]!r}")
    return int(named[1]), int(named[2])


class DelayService:
    """Hold delayed messages, deliver them when due, recall them before."""

    def __init__(self, store: Store, *, max_delay: float, clock: Clock = system_clock) -> None:
        """``max_delay``: seconds ahead a delayed message may be due."""
        self._store = store
        self._max_delay_ms = to_ms(max_delay)
        self._clock = clock
        self._log = RateLimitedLog(log)

    def is_delayed(self, message: Message, now_ms: int) -> bool:
        """Whether ``message`` waits (due later than ``now_ms``); one due already is sent at once,
        as RocketMQ does. Raises InvalidDeliveryTime for one due beyond the maximum delay."""
        if message.deliver_at is None or message.deliver_at <= now_ms:
            return False
        if message.deliver_at - now_ms > self._max_delay_ms:
            raise InvalidDeliveryTime(
                f"message {message.message_id!r} is due in {(message.deliver_at - now_ms) / 1000:.0f} s,"
                f" beyond the broker's maximum delay of {self._max_delay_ms / 1000:.0f} s"
            )
        return True

    async def hold(self, placed: Sequence[tuple[Message, int]], now_ms: int) -> list[Placement]:
        """Store delayed messages for their queues, all or none, a timer's with its due time in its
        ``DELIVER_AT`` property; each placement's offset is -1 (it has none until due) and its
        recall handle names it and when it is due."""
        timed = [
            (replace(m, properties={**m.properties, DELIVER_AT: str(m.deliver_at)}) if m.timer else m, q)
            for m, q in placed
        ]
        held = await self._store.hold(timed, now_ms)
        return [
            Placement(h.topic, h.queue_id, -1, h.message_id, recall_handle=f"{h.delay_id}.{h.due_at}") for h in held
        ]

    async def recall(self, topic: str, recall_handle: str) -> str:
        """Cancel a delayed message before it is due; return its message id. Raises
        InvalidArgument for a malformed handle, DelayedMessageNotFound if none waits under it."""
        delay_id, _ = due_of(recall_handle)
        return await self._store.recall(topic, delay_id)

    async def deliver_due(self) -> int:
        """Deliver every delayed message due now; return how many."""
        now_ms, delivered = to_ms(self._clock()), 0
        while (count := await self._store.deliver_due(now_ms, STEP)) > 0:
            delivered += count
            if count < STEP:
                break
        return delivered

    async def run(self) -> None:
        """Deliver delayed messages as they come due, until cancelled."""
        while True:
            try:
                due = await self._store.query(self._store.next_due)
                wait = TICK if due is None else min(TICK, (due - to_ms(self._clock())) / 1000)
                if wait <= 0:
                    await self.deliver_due()
                    continue
            except HalfmqError as exc:  # the store failed this time: try again next tick
                self._log.warning(exc.code, "delivering delayed messages failed: %s", exc)
                wait = TICK
            await asyncio.sleep(wait)
