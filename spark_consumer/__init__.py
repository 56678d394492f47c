"""Spark consumer of halfmq: the ``halfmq`` PySpark data source and example jobs.

import spark_consumer
spark_consumer.register(spark)
spark.readStream.format("halfmq").option("broker", "127.0.0.1:10911").option("topics", "orders").load()
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``halfmq`` data source with a SparkSession."""
    from spark_consumer.source import HalfmqDataSource

    spark.dataSource.register(HalfmqDataSource)


__all__ = ["register"]
