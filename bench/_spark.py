"""The local Spark session the benchmarks run in: ``local[2]``, bound to 127.0.0.1, no UI, only
errors in its log, halfmq's data source registered, its Python workers on this interpreter."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(*packages: str) -> Any:
    """The session, Spark fetching ``packages`` (Maven coordinates) from Maven Central if any.
    Imports pyspark only when called, so that the benchmarks' helpers import without it."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_consumer

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_consumer.register(spark)
    return spark
