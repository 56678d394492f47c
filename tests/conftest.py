from __future__ import annotations

import fcntl
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from halfmq_peers.kafka import SPARK_CONNECTOR
from tests.support import BrokerThread, FakeClock, broker_settings

# Every Spark JVM of the run, in-process sessions, job programs and the docs' blocks alike, reads
# its defaults from here (tests/spark-conf/spark-defaults.conf says what and why).
os.environ["SPARK_CONF_DIR"] = str(Path(__file__).parent / "spark-conf")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(tmp_path: Path, clock: FakeClock) -> Iterator[BrokerThread]:
    """A broker on a fake clock; the test runs check rounds itself with ``broker.check_once()``."""
    running = BrokerThread(broker_settings(tmp_path / "data"), clock)
    yield running
    running.stop()


_SPARK: dict[str, Any] = {}


def _start_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_consumer

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("halfmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")  # where the local executors fetch the added jars from
        .config("spark.jars.packages", SPARK_CONNECTOR)  # Spark's own Kafka source and sink, fetched by Spark
    )
    # Ivy fetches the packages into one cache per user, and two JVMs filling an empty one at once
    # break each other's downloads (on a fresh machine both workers' JVMs exited): one at a time.
    with (Path(tempfile.gettempdir()) / "halfmq-spark-packages.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    spark_consumer.register(session)
    return session


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group each conformance client's scenarios, so that with ``--dist loadgroup`` a client is
    set up (installed, built) on one worker while the clients spread over both. Start the JVM
    before any test runs: launching it from a process whose in-process brokers have gRPC threads
    running made it exit before it answered, now and then, in CI."""
    for item in items:
        params = getattr(item, "callspec", None)
        client = params and (params.params.get("client") or params.params.get("built"))
        if item.path.name.startswith("test_conformance_") and client:
            item.add_marker(pytest.mark.xdist_group(f"{item.path.stem}-{client}"))
    if any("spark" in getattr(item, "fixturenames", ()) for item in items):
        _SPARK["session"] = _start_spark()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole run; its Python workers use this interpreter."""
    session = _SPARK.get("session") or _start_spark()
    yield session
    session.stop()
