"""Spark consumer of halfmq: the ``halfmq`` PySpark data source and example jobs.

import spark_consumer
spark_consumer.register(spark)
spark.readStream.format("halfmq").option("broker", "127.0.0.1:10911").option("topics", "orders").load()
"""

from __future__ import annotations

import os
import sys
from typing import Any


def register(spark: Any) -> None:
    """Register the ``halfmq`` data source with a SparkSession.

    In local mode without ``PYSPARK_PYTHON``, Spark's Python workers would start the first
    ``python3`` on PATH, which need not be the interpreter halfmq is installed in (a virtualenv
    that is not activated, say): the workers then run this interpreter, as the driver does. On a
    cluster, ``PYSPARK_PYTHON`` must name the executors' Python with halfmq installed.
    """
    from spark_consumer.source import HalfmqDataSource

    context = spark.sparkContext
    if "PYSPARK_PYTHON" not in os.environ and context.master.startswith("local"):
        context.pythonExec = sys.executable
    spark.dataSource.register(HalfmqDataSource)


__all__ = ["register"]
