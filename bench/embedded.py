"""What a function-scoped ``halfmq_broker`` costs a test: starting the broker process until it
serves, and discarding it after the test.

    .venv/bin/python -m bench.embedded --rounds 10
"""

from __future__ import annotations

import argparse
import statistics
import time

from halfmq_testing import EmbeddedBroker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    starts, discards = [], []
    for _ in range(args.rounds):
        began = time.perf_counter()
        broker = EmbeddedBroker().start()
        starts.append(time.perf_counter() - began)
        began = time.perf_counter()
        broker.discard()
        discards.append(time.perf_counter() - began)
    for name, times in (("start", starts), ("discard", discards)):
        print(f"{name:>8}: mean {statistics.mean(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s")
    per_test = statistics.mean(starts) + statistics.mean(discards)
    print(f"per test: {per_test:.3f} s (the goal: under 1 s)")


if __name__ == "__main__":
    main()
