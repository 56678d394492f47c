"""The real brokers beside halfmq: Apache RocketMQ 5 and Apache Kafka as local processes,
fetched from Maven Central once and cached, each on free ports with a data directory of its own
(``halfmq peers run``, the pytest fixtures ``rocketmq_peer`` and ``kafka_peer``)."""
