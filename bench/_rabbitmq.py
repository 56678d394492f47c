"""The peers to beat: RabbitMQ AMQP transactions (tx.select; publish; tx.commit per message, durable
queue), and publisher confirms (no transaction: persistent publishes, each awaited until confirmed).

Uses Debian's rabbitmq-server (``apt-get install rabbitmq-server``), started here as a private
node on a free port with its own data directory, and aio-pika as the asyncio client.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


def unavailable_reason() -> str | None:
    """Why the peer cannot run here, or None if it can."""
    if not SERVER.exists():
        return f"{SERVER} not found (apt-get install rabbitmq-server)"
    try:
        import aio_pika  # noqa: F401
    except ImportError:
        return "aio-pika is not installed (pip install -e '.[bench]')"
    return None


class RabbitMQ:
    """A private RabbitMQ node for one benchmark run."""

    def __init__(self, port: int, dist_port: int) -> None:
        self.port = port
        self.home = Path(tempfile.mkdtemp(prefix="halfmq-bench-rabbitmq-"))
        env = {
            **os.environ,
            "HOME": str(self.home),
            "RABBITMQ_NODENAME": f"halfmqbench{port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.home / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.home / "enabled_plugins"),
        }
        self.log = (self.home / "server.log").open("w")
        self.process = subprocess.Popen([str(SERVER)], env=env, stdout=self.log, stderr=subprocess.STDOUT)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        import aio_pika

        deadline = time.monotonic() + timeout
        while True:
            try:
                connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{self.port}/")
                await connection.close()
                return
            except Exception:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"RabbitMQ did not start; see {self.home / 'server.log'}") from None
                await asyncio.sleep(0.5)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        subprocess.run(["pkill", "-f", f"halfmqbench{self.port}@localhost"], check=False)
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


async def run_transactions(port: int, producers: int, seconds: float, body: bytes) -> tuple[list[float], float]:
    """Committed AMQP transactions of one message each, ``producers`` connections in parallel:
    (each one's publish-commit latency in seconds, the seconds they took)."""
    import aio_pika

    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def producer() -> None:
        connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{port}/")
        async with connection:
            channel = await connection.channel(publisher_confirms=False)
            await channel.declare_queue("halfmq-bench", durable=True)
            transaction = channel.transaction()
            await transaction.select()
            message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            while (began := time.perf_counter()) < stop_at:
                await channel.default_exchange.publish(message, routing_key="halfmq-bench")
                await transaction.commit()
                latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(producers)))
    return latencies, time.perf_counter() - began


async def run_confirms(port: int, in_flight: int, seconds: float, body: bytes) -> float:
    """Confirmed persistent publishes per second on one channel, ``in_flight`` awaiting confirms at a time."""
    import aio_pika

    count = 0
    stop_at = time.perf_counter() + seconds
    connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{port}/")
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue("halfmq-bench-confirms", durable=True)
        message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)

        async def publisher() -> None:
            nonlocal count
            while time.perf_counter() < stop_at:
                await channel.default_exchange.publish(message, routing_key="halfmq-bench-confirms")
                count += 1

        began = time.perf_counter()
        await asyncio.gather(*(publisher() for _ in range(in_flight)))
        return count / (time.perf_counter() - began)


async def measure(port: int, dist_port: int, producers: int, seconds: float, body: bytes) -> tuple[float, float]:
    """(AMQP transactions/s with ``producers`` connections, confirmed publishes/s with as many in flight)."""
    server = RabbitMQ(port, dist_port)
    try:
        await server.wait_ready()
        latencies, elapsed = await run_transactions(port, producers, seconds, body)
        return len(latencies) / elapsed, await run_confirms(port, producers, seconds, body)
    finally:
        server.stop()
