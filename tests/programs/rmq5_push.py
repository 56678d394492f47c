"""A RocketMQ 5 PushConsumer using the official Python client, for the retry tests.

    python -m tests.programs.rmq5_push ENDPOINT GROUP MODE SECONDS
Its listener prints ``GOT body attempt`` for every delivery, and answers FAILURE for the first two
deliveries of a message (MODE ``flaky``), or for every one (MODE ``failing``), SUCCESS otherwise.
It exits after SECONDS.
"""

from __future__ import annotations

import os
import sys
import time

from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer


class Listener(MessageListener):
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def consume(self, message) -> ConsumeResult:
        attempt = message.delivery_attempt
        print(f"GOT {message.body.decode()} {attempt}", flush=True)
        if self.mode == "failing" or attempt <= 2:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def main(endpoint: str, group: str, mode: str, seconds: float) -> None:
    credentials = Credentials("halfmq", os.environ["RMQ_SK"]) if "RMQ_SK" in os.environ else Credentials()
    consumer = PushConsumer(ClientConfiguration(endpoint, credentials), group, Listener(mode),
                            {"orders": FilterExpression()})  # fmt: skip
    consumer.startup()
    time.sleep(seconds)
    consumer.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
