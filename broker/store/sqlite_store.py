"""The durable log on SQLite: topic queues, the half and op logs, transaction records, offsets.

``Store`` is one object over one SQLite file, put together from one part per idea: ``logs``
(topics and queue logs), ``delays`` (delayed messages until due), ``transactions`` (half
messages, resolutions, checks), ``batches`` (exactly-once batches: open ranges of the queue
logs), ``kafka_txn`` (Kafka-model transactions: open ranges too, and consumer offsets),
``offsets`` (consumer progress), ``retention`` (deletion by age), ``packing`` (committed
messages packed for pulls, in a file of their own) and ``browse`` (messages found for
operators, and their traces), over ``base`` (the file, its writer and its
readers).
"""

from __future__ import annotations

from broker.store.base import DB_FILE
from broker.store.batches import BatchStore
from broker.store.browse import BrowseStore
from broker.store.delays import DelayStore
from broker.store.kafka_txn import KafkaTxnStore
from broker.store.offsets import OffsetStore
from broker.store.packing import SegmentStore
from broker.store.retention import RetentionStore
from broker.store.transactions import TransactionStore

__all__ = ["DB_FILE", "Store"]


class Store(
    BatchStore, DelayStore, KafkaTxnStore, TransactionStore, OffsetStore, RetentionStore, SegmentStore, BrowseStore
):
    """The broker's durable state in one SQLite file under ``data_dir``."""
