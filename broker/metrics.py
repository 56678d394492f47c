"""Prometheus metrics of the broker (RocketMQ 5's transaction metrics, RIP-46, as ``halfmq_*``).

One ``Metrics`` object per broker, with its own registry; services record into it and the HTTP
front end exposes it at ``/metrics``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.model import TransactionState


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._half = Gauge("halfmq_half_messages", "Pending half messages", registry=self.registry)
        self._resolved = {
            TransactionState.COMMITTED: Counter(
                "halfmq_commit_messages", "Transactions committed", registry=self.registry
            ),
            TransactionState.ROLLED_BACK: Counter(
                "halfmq_rollback_messages", "Transactions rolled back", registry=self.registry
            ),
            TransactionState.DISCARDED: Counter(
                "halfmq_discard_messages", "Half messages discarded", registry=self.registry
            ),
        }
        self._checks = Counter(
            "halfmq_checks",
            "Check requests by outcome: delivered, undelivered, expired unanswered, refunded, or the producer's answer",
            ["outcome"],
            registry=self.registry,
        )
        self._finish = Histogram(
            "halfmq_finish_latency_seconds",
            "Time from half message stored to resolution",
            buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 3600, 86400),
            registry=self.registry,
        )
        self._commit_latency = Histogram(
            "halfmq_store_commit_latency_seconds",
            "Time of one group commit (SQLite transaction, fsync included)",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1),
            registry=self.registry,
        )
        self._deleted = Counter(
            "halfmq_retention_deleted",
            "What retention deleted: committed messages, or resolved transactions with their half and op records",
            ["kind"],
            registry=self.registry,
        )
        self._pull_restarts = Counter(
            "halfmq_pull_process_restarts", "Pull processes that exited and were started again", registry=self.registry
        )
        self._packed = Counter(
            "halfmq_packed_messages", "Committed messages packed into segments for pulls", registry=self.registry
        )
        self._txn_ended = Counter(
            "halfmq_kafka_transactions_ended",
            "Kafka-model transactions ended: committed, or aborted by their producer, by fencing or by their timeout",
            ["outcome"],
            registry=self.registry,
        )
        self._txn_open = Gauge(
            "halfmq_kafka_transactions_open", "Kafka-model transactions open", registry=self.registry
        )
        self._kafka_requests = Counter(
            "halfmq_kafka_requests", "Requests answered on the Kafka port, by API", ["api"], registry=self.registry
        )
        self._remoting_requests = Counter(
            "halfmq_remoting_requests",
            "RocketMQ remoting requests answered, by listener (namesrv, remoting) and request code",
            ["listener", "code"],
            registry=self.registry,
        )
        self._batch = Histogram(
            "halfmq_store_group_commit_jobs",
            "Write jobs per group commit",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
            registry=self.registry,
        )

    def totals(self) -> dict[str, float]:
        """Counter totals so far: committed, rolled_back, discarded, and checks by outcome."""
        totals: dict[str, float] = {}
        for key, counter in [(s.value.lower(), c) for s, c in self._resolved.items()] + [("checks", self._checks)]:
            for sample in next(iter(counter.collect())).samples:
                if sample.name.endswith("_total"):
                    outcome = sample.labels.get("outcome")
                    totals[f"{key}_{outcome}" if outcome else key] = sample.value
        return totals

    def watch_store(
        self, usage: Callable[[], tuple[int, int]], low_offsets: Callable[[], dict[tuple[str, int], int]]
    ) -> None:
        """Read the store's size (on disk, in use) and every queue's low offset at each scrape."""
        Gauge("halfmq_store_bytes", "Bytes every file of the store takes on disk", registry=self.registry).set_function(
            lambda: usage()[0]
        )
        Gauge("halfmq_store_used_bytes", "Bytes of the databases' pages in use", registry=self.registry).set_function(
            lambda: usage()[1]
        )
        self.registry.register(_LowOffsets(low_offsets))

    def watch_delayed(self, delayed_by_topic: Callable[[], dict[str, tuple[int, int]]]) -> None:
        """Read the delayed messages waiting per topic, and when the first is due, at each scrape."""
        self.registry.register(_Delayed(delayed_by_topic))

    def watch_retries(self, retry_counts: Callable[[], dict[str, tuple[int, int]]]) -> None:
        """Read each consumer group's retrying and dead-lettered messages at each scrape."""
        self.registry.register(_Retries(retry_counts))

    def retention_deleted(self, messages: int, transactions: int) -> None:
        self._deleted.labels("messages").inc(messages)
        self._deleted.labels("transactions").inc(transactions)

    def watch_half_messages(self, count: Callable[[], int]) -> None:
        """Read the pending count when scraped, so the gauge is always the store's truth."""
        self._half.set_function(count)

    def resolved(self, resolutions: Sequence[tuple[TransactionState, float]]) -> None:
        """Count a batch of new resolutions, given as (state, seconds since the half was stored):
        each state's counter once per batch; the latency histogram, which has no batched form,
        once per resolution."""
        for state, count in collections.Counter(state for state, _ in resolutions).items():
            self._resolved[state].inc(count)
        for _, seconds in resolutions:
            self._finish.observe(max(seconds, 0.0))

    def watch_open_transactions(self, count: Callable[[], int]) -> None:
        """Read the number of open Kafka-model transactions when scraped."""
        self._txn_open.set_function(count)

    def transactions_ended(self, outcome: str, count: int = 1) -> None:
        """Count Kafka-model transactions ended: ``committed``, ``aborted`` (by the producer),
        ``fenced`` or ``timed_out``."""
        self._txn_ended.labels(outcome=outcome).inc(count)

    def check(self, outcome: str, count: int = 1) -> None:
        self._checks.labels(outcome=outcome).inc(count)

    def pull_process_restarted(self) -> None:
        self._pull_restarts.inc()

    def kafka_request(self, api: str) -> None:
        self._kafka_requests.labels(api).inc()

    def remoting_request(self, listener: str, code: int) -> None:
        self._remoting_requests.labels(listener, str(code)).inc()

    def packed(self, messages: int) -> None:
        self._packed.inc(messages)

    def group_commit(self, jobs: int, seconds: float) -> None:
        self._batch.observe(jobs)
        self._commit_latency.observe(seconds)


class _LowOffsets(Collector):
    """``halfmq_queue_low_offset{topic, queue}``: the oldest offset each queue still holds."""

    def __init__(self, low_offsets: Callable[[], dict[tuple[str, int], int]]) -> None:
        self._low_offsets = low_offsets

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "halfmq_queue_low_offset", "Oldest offset a queue holds (retention moves it up)", labels=["topic", "queue"]
        )
        for (topic, queue_id), low in sorted(self._low_offsets().items()):
            family.add_metric([topic, str(queue_id)], low)
        yield family


class _Delayed(Collector):
    """``halfmq_delayed_messages{topic}`` and ``halfmq_delayed_next_due_seconds{topic}``."""

    def __init__(self, delayed_by_topic: Callable[[], dict[str, tuple[int, int]]]) -> None:
        self._delayed_by_topic = delayed_by_topic

    def collect(self) -> Iterator[Metric]:
        waiting = GaugeMetricFamily("halfmq_delayed_messages", "Delayed messages waiting to be due", labels=["topic"])
        due = GaugeMetricFamily(
            "halfmq_delayed_next_due_seconds", "When the first delayed message is due (epoch seconds)", labels=["topic"]
        )
        for topic, (count, next_due) in sorted(self._delayed_by_topic().items()):
            waiting.add_metric([topic], count)
            due.add_metric([topic], next_due / 1000)
        yield waiting
        yield due


class _Retries(Collector):
    """``halfmq_consumer_retrying_messages{group}`` and ``halfmq_dead_letter_messages{group}``."""

    def __init__(self, retry_counts: Callable[[], dict[str, tuple[int, int]]]) -> None:
        self._retry_counts = retry_counts

    def collect(self) -> Iterator[Metric]:
        retrying = GaugeMetricFamily(
            "halfmq_consumer_retrying_messages",
            "Messages a consumer group got more than once and has not acknowledged",
            labels=["group"],
        )
        dead = GaugeMetricFamily(
            "halfmq_dead_letter_messages", "Messages in the group's dead-letter topic %DLQ%<group>", labels=["group"]
        )
        for group, (count, letters) in sorted(self._retry_counts().items()):
            retrying.add_metric([group], count)
            dead.add_metric([group], letters)
        yield retrying
        yield dead
