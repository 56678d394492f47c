"""The example exactly-once job on a real Spark standalone cluster (issue 10): a master and two
workers on loopback, started with the pyspark package's own ``spark-class``, so executors run in
their own JVMs and Python workers, and reach the broker over gRPC like any remote client: its
pull processes, at the ports it advertises."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyspark
import pytest

from halfmq_testing import free_port
from tests.support import BrokerThread, broker_settings, wait_until
from tests.test_spark_exactly_once import amounts, send_orders

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).parent
WORKERS = 2


def spark_env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    """A broker with two pull processes, which the job's executors read from."""
    running = BrokerThread(broker_settings(tmp_path / "data", pull_processes=2))
    yield running
    running.stop()


def alive_workers(ui: str) -> int:
    try:
        return int(httpx.get(f"{ui}/json/", timeout=2).json()["aliveworkers"])
    except (httpx.HTTPError, ValueError, KeyError):
        return 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[Path]]]:
    """``spark://`` URL of a running master with WORKERS one-core workers, and their work dirs."""
    port, ui_port = free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    started: list[subprocess.Popen[bytes]] = []

    def launch(name: str, *argv: str) -> None:
        with (logs / f"{name}.log").open("wb") as log:
            started.append(subprocess.Popen([spark_class, *argv], env=spark_env(), stdout=log, stderr=log))

    url = f"spark://127.0.0.1:{port}"
    work_dirs = [tmp_path / f"worker-{i}" for i in range(WORKERS)]
    try:
        launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui_port))  # fmt: skip
        for i, work in enumerate(work_dirs):
            launch(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores",
                   "1", "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work))  # fmt: skip
        wait_until(lambda: alive_workers(f"http://127.0.0.1:{ui_port}") == WORKERS, timeout=120)
        yield url, work_dirs
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_the_exactly_once_job_runs_on_a_standalone_cluster_with_executors_in_their_own_jvms(broker, tmp_path, cluster):
    url, work_dirs = cluster
    expected = send_orders(broker.address, 40)
    began = time.monotonic()
    job = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", url, "--conf", "spark.executor.memory=512m",
         "--conf", "spark.executor.cores=1", "--conf", "spark.ui.enabled=false",
         str(ROOT / "spark_consumer" / "jobs" / "order_totals.py"), "--broker", broker.address, "--topic", "orders",
         "--checkpoint", str(tmp_path / "checkpoint"), "--sink", str(tmp_path / "totals.db"),
         "--parquet", str(tmp_path / "parquet"), "--once", "--max-per-batch", "10"],
        cwd=tmp_path, env=spark_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr[-5000:]
    assert amounts(tmp_path) == expected
    # Each worker ran an executor of the job: its own JVM, with its own log under the work dir.
    executor_logs = [list(work.glob("app-*/*/stderr")) for work in work_dirs]
    assert all(executor_logs), f"executors per worker: {executor_logs} after {time.monotonic() - began:.0f}s"
