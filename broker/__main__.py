"""``python -m broker`` / ``halfmq-broker``: run the broker until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys
from typing import Any

from broker.app import Broker
from broker.config import load_settings
from broker.errors import StoreInUse
from broker.memory import keep_freed_memory
from broker.ports import PortUnavailable, check_ports, wanted_ports
from broker.ratelog import RateLimitedLog

log = logging.getLogger("broker")


def raise_open_file_limit() -> None:
    """Every connection is a file descriptor: take the hard limit, not the (often 1,024) soft one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        log.info("open-file limit raised from %d to %d", soft, hard)


def bounded_loop_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log the loop's own errors (such as accept() failing for want of descriptors) one line per
    kind per 10 s, instead of one traceback per failure."""
    errors = RateLimitedLog(logging.getLogger("broker.loop"))

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        errors.warning(context["message"], "%s%s", context["message"], f": {exc!r}" if exc else "")

    loop.set_exception_handler(handle)


async def serve(broker: Broker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    bounded_loop_errors(loop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except BaseException:
        await broker.stop(grace=0)  # release the port and the store before reporting the failure
        raise
    print(
        f"halfmq broker ready grpc={broker.settings.host}:{broker.grpc_port}"
        f" http={broker.settings.host}:{broker.http_port}"
        f" kafka={broker.settings.host}:{broker.kafka_port}"
        + (f" pull={','.join(map(str, broker.pull_processes.ports))}" if broker.pull_processes.ports else ""),
        flush=True,
    )
    await stop.wait()
    await broker.stop()


def rocketmq_available() -> bool:
    from broker.rocketmq_api.protocol import ProtocolUnavailable, load

    try:
        load()
    except ProtocolUnavailable:
        return False
    return True


def main() -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings(sys.argv[1:], os.environ)
    raise_open_file_limit()
    keep_freed_memory()
    try:
        check_ports(settings.host, wanted_ports(settings, rocketmq=rocketmq_available()))
        broker = Broker(settings)
    except (PortUnavailable, StoreInUse) as exc:
        print(f"halfmq-broker: {exc}", file=sys.stderr)
        sys.exit(2)
    asyncio.run(serve(broker))


if __name__ == "__main__":
    main()
