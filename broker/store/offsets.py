"""Consumer progress: committed offsets, and receive / ack for RocketMQ 5 consumer groups."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from broker.store import deliveries
from broker.store.base import StoreBase
from broker.store.deliveries import Delivery
from broker.store.sql import set_consumer_offset, translated


class OffsetStore(StoreBase):
    """Where each consumer group is in each queue."""

    async def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        def work(conn: sqlite3.Connection) -> None:
            set_consumer_offset(conn, group, topic, queue_id, offset)

        return await self._writer.run(work)

    # --- receive / ack (RocketMQ 5 consumers) -----------------------------------------------

    async def receive(
        self,
        group: str,
        topic: str,
        queue_id: int,
        batch: int,
        invisible_ms: int,
        now_ms: int,
        wanted: Callable[[str], bool],
        max_bytes: int,
    ) -> list[Delivery]:
        """Hand out up to ``batch`` visible, unacknowledged messages of a queue to ``group``, within
        ``max_bytes`` (at least one); ``wanted`` filters by tag."""
        return await self._writer.run(
            deliveries.receive(group, topic, queue_id, batch, invisible_ms, now_ms, wanted, max_bytes)
        )

    async def ack(self, group: str, topic: str, handle: str) -> None:
        """Acknowledge a delivery; raise StaleReceiptHandle if the handle is no longer current."""
        await self._writer.run(deliveries.ack(group, topic, handle))

    async def change_invisible(self, group: str, topic: str, handle: str, visible_at: int) -> str:
        """Move a delivery's visibility; returns its new receipt handle. Raises StaleReceiptHandle."""
        return await self._writer.run(deliveries.change_invisible(group, topic, handle, visible_at))

    @translated
    def consumer_groups(self) -> list[tuple[str, str, int, int]]:
        """Every committed consumer offset as (group, topic, queue_id, offset)."""
        return list(self._reader().execute("SELECT * FROM consumer_offsets ORDER BY consumer_group, topic, queue_id"))

    @translated
    def consumer_offsets(self, group: str, topic: str) -> dict[int, int]:
        rows = (
            self._reader()
            .execute(
                "SELECT queue_id, queue_offset FROM consumer_offsets WHERE consumer_group = ? AND topic = ?",
                (group, topic),
            )
            .fetchall()
        )
        return dict(rows)
