from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import BrokerThread, FakeClock, broker_settings


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(tmp_path: Path, clock: FakeClock) -> Iterator[BrokerThread]:
    """A broker on a fake clock; the test runs check rounds itself with ``broker.check_once()``."""
    running = BrokerThread(broker_settings(tmp_path / "data"), clock)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole run; its Python workers use this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_consumer

    session = (
        SparkSession.builder.master("local[2]")
        .appName("halfmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark_consumer.register(session)
    yield session
    session.stop()
