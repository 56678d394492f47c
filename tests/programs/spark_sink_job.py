"""A streaming query that copies topic ``input`` to topic ``output`` through the ``halfmq`` sink,
with the faults the sink tests need. Its sink is the real one, subclassed here (pickled by value
to Spark's Python workers, as this is ``__main__``) to add:

- ``--crash before-commit|after-commit --crash-batch N``: SIGKILL the whole driver (this process
  and its JVM) just before or just after the sink's commit of batch N, so Spark's commit log never
  records it;
- ``--group-per-run``: prepare and commit under a producer group of this run, not of the query
  (whose id lives in the checkpoint), so that no batch marker survives a restart: two-phase
  commit without the marker (to show the duplicate the marker prevents);
- ``--fail-first-attempt``: the first attempt of batch 0's first task prepares its rows, then
  fails; Spark retries it (``local[2,2]`` allows one retry);
- ``--visibility FILE``: before and after each commit, append "<batch> <when> <messages in output>".

Usage: python -m tests.programs.spark_sink_job BROKER CHECKPOINT [options]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql import SparkSession

import spark_consumer
from spark_consumer.client import BrokerClient, Connection
from spark_consumer.source import HalfmqDataSource
from spark_consumer.writer import BATCH_ID, QUERY_ID, HalfmqStreamWriter, Prepared, SinkOptions, publish


class FaultySink(HalfmqDataSource):
    """The halfmq sink plus the ``fault.*`` options (Spark hands a data source its options in
    lower case)."""

    @classmethod
    def name(cls) -> str:
        return "halfmq_faulty"

    def streamWriter(self, schema: Any, overwrite: bool) -> HalfmqStreamWriter:
        faults = {k: v for k, v in self.options.items() if k.startswith("fault.")}
        options = {k: v for k, v in self.options.items() if not k.startswith("fault.")}
        return FaultyWriter(SinkOptions.parse(options, schema), faults)


class FaultyWriter(HalfmqStreamWriter):
    def __init__(self, options: SinkOptions, faults: dict[str, str]) -> None:
        super().__init__(options)
        self.faults = faults

    def write(self, iterator: Any) -> Prepared:
        context = TaskContext.get()
        if "fault.run" in self.faults:
            group = f"spark-{context.getLocalProperty(QUERY_ID)}-{self.faults['fault.run']}"
            prepared = publish(self.options, iterator, group, int(context.getLocalProperty(BATCH_ID)))
        else:
            prepared = super().write(iterator)
        if (
            self.faults.get("fault.failfirst") == "true"
            and context.getLocalProperty("streaming.sql.batchId") == "0"
            and context.partitionId() == 0
            and context.attemptNumber() == 0
        ):
            raise RuntimeError(f"injected failure after preparing ranges {prepared.range_ids}")
        return prepared

    def commit(self, messages: list[Any], batchId: int) -> None:
        self._note(batchId, "before")
        self._crash_if("before-commit", batchId)
        super().commit(messages, batchId)
        self._note(batchId, "after")
        self._crash_if("after-commit", batchId)

    def _crash_if(self, when: str, batch_id: int) -> None:
        if self.faults.get("fault.crash") == when and int(self.faults["fault.batch"]) == batch_id:
            os.killpg(int(self.faults["fault.group"]), signal.SIGKILL)  # the driver and its JVM
            os._exit(9)

    def _note(self, batch_id: int, when: str) -> None:
        if "fault.visibility" in self.faults:
            with BrokerClient(Connection(self.options.connection.broker)) as client:
                count = sum(high for _, high in client.ranges(("output",))["output"].values())
            with open(self.faults["fault.visibility"], "a") as out:
                out.write(f"{batch_id} {when} {count}\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("broker")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--per-batch", type=int, default=10)
    parser.add_argument("--crash", choices=["before-commit", "after-commit"])
    parser.add_argument("--crash-batch", type=int, default=1)
    parser.add_argument("--group-per-run", action="store_true")
    parser.add_argument("--fail-first-attempt", action="store_true")
    parser.add_argument("--visibility", type=Path)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2,2]")  # one retry per failed task
        .appName("halfmq-sink-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_consumer.register(spark)
    spark.dataSource.register(FaultySink)
    faults = {
        "fault.crash": args.crash or "",
        "fault.batch": str(args.crash_batch),
        "fault.group": str(os.getpgid(0)),
        **({"fault.run": uuid.uuid4().hex} if args.group_per_run else {}),
        "fault.failfirst": str(args.fail_first_attempt).lower(),
        **({"fault.visibility": str(args.visibility)} if args.visibility else {}),
    }
    source = (
        spark.readStream.format("halfmq")
        .option("broker", args.broker)
        .option("topics", "input")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.per_batch))
        .load()
    )
    query = (
        source.select("body", "keys")
        .writeStream.format("halfmq_faulty")
        .option("broker", args.broker)
        .option("topic", "output")
        .options(**faults)
        .option("checkpointLocation", str(args.checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    print(f"QUERY {query.id} DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
