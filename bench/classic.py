"""RocketMQ's classic Java client against halfmq's name server and against Apache RocketMQ's, in
one run on this machine, both flushing synchronously (halfmq ``--flush sync``, RocketMQ
``flushDiskType=SYNC_FLUSH``): a TransactionMQProducer committing each message (send, local
transaction, end) and a DefaultMQProducer's plain sends, 64 threads, 1 KB
(bench/programs/ClassicSends.java).

    .venv/bin/python -m bench.classic --seconds 20

Goals: transactional sends at least 1.0 and plain sends at least 0.5 of the real broker's rate.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.txn import start_broker
from halfmq_peers.java import java_program
from halfmq_peers.rocketmq import RocketMQ
from halfmq_testing import free_port

PROGRAM = Path(__file__).resolve().parent / "programs" / "ClassicSends.java"
CLIENT = "org.apache.rocketmq:rocketmq-client:5.5.0"
THREADS = 64
GOALS = {"transactional": 1.0, "normal": 0.5}


def sends(namesrv: str, seconds: float) -> dict[str, float]:
    # the JVM's defaults (C2, parallel GC), as a client that sends for minutes runs in production
    program = java_program(PROGRAM, [CLIENT], jvm_options=())
    command = [*program, namesrv, "txn", "bench", str(int(seconds)), str(THREADS)]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 2 + 300)
    if ran.returncode != 0:
        raise RuntimeError(f"ClassicSends against {namesrv} failed:\n{ran.stderr[-4000:]}")
    figures: dict[str, float] = json.loads(ran.stdout.strip().splitlines()[-1])
    return figures


def real_broker(work: Path, seconds: float) -> dict[str, float]:
    with RocketMQ(work / "rocketmq", broker_config={"flushDiskType": "SYNC_FLUSH"}) as rocketmq:
        rocketmq.create_topic("txn", 4, "TRANSACTION")
        rocketmq.create_topic("bench", 4, "NORMAL")
        return sends(rocketmq.endpoints["namesrv"], seconds)


def halfmq(work: Path, seconds: float) -> dict[str, float]:
    namesrv, remoting = free_port(), free_port()
    process, _ = start_broker(work / "halfmq", "--flush", "sync", "--namesrv-port", str(namesrv),
                              "--remoting-port", str(remoting), "--topic", "txn:4", "--topic", "bench:4")  # fmt: skip
    try:
        return sends(f"127.0.0.1:{namesrv}", seconds)
    finally:
        process.terminate()
        process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20, help="seconds of each kind of send")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="halfmq-classic-bench-"))
    results: dict[str, Any] = {}
    try:
        results["rocketmq"] = real_broker(work, args.seconds)
        print(json.dumps({"rocketmq": results["rocketmq"]}), flush=True)
        results["halfmq"] = halfmq(work, args.seconds)
        print(json.dumps({"halfmq": results["halfmq"]}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nsync flush: halfmq / Apache RocketMQ, sends /s")
    for kind, goal in GOALS.items():
        ours, theirs = results["halfmq"][kind], results["rocketmq"][kind]
        verdict = "met" if ours / theirs >= goal else "missed"
        print(f"  {kind:<14} {ours:>10,.1f} / {theirs:>10,.1f} = {ours / theirs:.2f} (goal {goal}: {verdict})")


if __name__ == "__main__":
    main()
