"""What a halfmq task does to the Spark Python worker process it runs in."""

from __future__ import annotations

import gc
from functools import cache

from pyspark import TaskContext


def freeze_once_per_worker() -> None:
    """In a Spark task, freeze (``gc.freeze``) every object alive at the first halfmq task of its
    worker process. Spark's daemon runs a full garbage collection after each task a reused
    worker runs, and its cost grows with every object the process holds, most of them the
    modules the first task imported (pyspark's SQL modules, pyarrow, gRPC, protobuf, halfmq's
    own): 40 to 60 ms a collection here, against 0.1 ms once they are frozen. Objects made
    later are collected as before; one alive then that only a reference cycle holds once it is
    dropped is not reclaimed. Outside a task (a driver, a test calling the reader) it does
    nothing."""
    if TaskContext.get() is not None:
        _freeze()


@cache
def _freeze() -> None:
    gc.freeze()
