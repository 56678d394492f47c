"""``python -m broker`` / ``halfmq-broker``: run the broker until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from broker.app import Broker
from broker.config import load_settings


async def serve(broker: Broker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except BaseException:
        await broker.stop(grace=0)  # release the port and the store before reporting the failure
        raise
    print(
        f"halfmq broker ready grpc={broker.settings.host}:{broker.grpc_port}"
        f" http={broker.settings.host}:{broker.http_port}",
        flush=True,
    )
    await stop.wait()
    await broker.stop()


def main() -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings(sys.argv[1:], os.environ)
    asyncio.run(serve(Broker(settings)))


if __name__ == "__main__":
    main()
