"""Pull processes: Python processes beside the broker that serve its pulls from the same file.

A pull reads SQLite and packs a megabyte reply, which in the broker's process would share one
GIL with the transaction path's gRPC loop and its writer. A pull process owns its own
interpreter and read-only connections, so bulk readers (the Spark source) neither wait for the
broker nor slow its transactions. WAL lets readers in any process read beside the one writer,
and a read sees every commit that was acknowledged before it began.

``PullProcesses`` is the broker's side: it starts ``--pull-processes`` of them, one port each
(``--pull-port`` and the ports after it, or any free ones), restarts one that dies on the same
port, and stops them with the broker. ``python -m broker.pull_process`` is a process's own side:
it serves Pull, PullColumns, ReadColumns and GetQueueOffsets with the broker's TLS and token, says
``ready PORT`` on its stdout, and stops when its stdin closes, which is when the broker exits,
SIGKILL included.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable

from broker.config import Settings, load_settings
from broker.grpc_api import create_server
from broker.grpc_api.pulls import PullServicer
from broker.memory import keep_freed_memory
from broker.pulls import PullService
from broker.ratelog import RateLimitedLog
from broker.store.base import DB_FILE
from broker.store.reads import ReadOnlyStore

log = logging.getLogger("broker.pull_process")

START_TIMEOUT = 30.0
RESTART_DELAY = 1.0
STOP_TIMEOUT = 5.0
STDIN = 0


class PullProcesses:
    """The broker's pull processes, for ``settings``; ``on_restart`` hears of each one restarted."""

    def __init__(self, settings: Settings, *, on_restart: Callable[[], None]) -> None:
        self._settings = settings
        self._on_restart = on_restart
        self._processes: list[asyncio.subprocess.Process] = []
        self._watchers: list[asyncio.Task[None]] = []
        self._log = RateLimitedLog(log)  # a port taken for good must not flood the log, one try a second
        self.ports: list[int] = []

    async def start(self) -> list[int]:
        """Start every process and return their ports once each serves. Raises RuntimeError if
        one cannot start (its port is taken, say); the ones started are stopped then."""
        first = self._settings.pull_port
        try:
            for index in range(self._settings.pull_processes):
                process, port = await self._spawn(first + index if first else 0)
                self._processes.append(process)
                self.ports.append(port)
        except BaseException:
            await self.stop()
            raise
        self._watchers = [asyncio.create_task(self._watch(index)) for index in range(len(self._processes))]
        return self.ports

    async def stop(self) -> None:
        """Close each process's stdin, which stops it, and kill what is left after STOP_TIMEOUT."""
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        for process in self._processes:
            if process.stdin is not None:
                process.stdin.close()
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in self._processes)), STOP_TIMEOUT)
        except TimeoutError:
            for process in self._processes:
                if process.returncode is None:
                    process.kill()
            await asyncio.gather(*(p.wait() for p in self._processes))
        self._processes.clear()

    async def _watch(self, index: int) -> None:
        """Restart process ``index`` on its port whenever it exits, RESTART_DELAY apart."""
        port = self.ports[index]
        while True:
            code = await self._processes[index].wait()
            self._log.warning(f"exit {port}", "pull process on port %d exited with %s; restarting it", port, code)
            await asyncio.sleep(RESTART_DELAY)
            try:
                self._processes[index], _ = await self._spawn(port)
            except RuntimeError as exc:
                self._log.warning(f"restart {port}", "%s", exc)
                continue
            self._on_restart()

    async def _spawn(self, port: int) -> tuple[asyncio.subprocess.Process, int]:
        settings = self._settings
        args = ["--data-dir", str(settings.data_dir), "--host", settings.host, "--pull-port", str(port)]
        if settings.tls is not None:
            args += ["--tls-cert", str(settings.tls.cert), "--tls-key", str(settings.tls.key)]
            if settings.tls.client_ca is not None:
                args += ["--tls-client-ca", str(settings.tls.client_ca)]
        env = {name: value for name, value in os.environ.items() if not name.startswith("HALFMQ_")}
        if settings.auth_token is not None:
            env["HALFMQ_AUTH_TOKEN"] = settings.auth_token  # not in argv, where ps would show it
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "broker.pull_process", *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)
        except TimeoutError:
            line = b""
        except asyncio.CancelledError:  # the broker is stopping: this one must not outlive it
            process.kill()
            await process.wait()
            raise
        if not line.startswith(b"ready "):
            if process.returncode is None:
                process.kill()
            code = await process.wait()
            raise RuntimeError(
                f"the pull process for port {port or 'any'} did not start (exit code {code}); its error is in the"
                " broker's log"
            )
        return process, int(line.split()[1])


async def serve(settings: Settings) -> None:
    """Serve the pulls of the store under ``settings.data_dir`` until stdin closes or SIGTERM."""
    reads = ReadOnlyStore(settings.data_dir / DB_FILE)
    server, port = create_server(
        PullServicer(PullService(reads)),
        f"{settings.host}:{settings.pull_port}",
        auth_token=settings.auth_token,
        tls=settings.tls,
    )
    await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def stdin_readable() -> None:
        if not os.read(STDIN, 4096):  # end of file: the broker closed it, or exited
            loop.remove_reader(STDIN)
            stop.set()

    loop.add_reader(STDIN, stdin_readable)
    log.info("pull process serving pulls of %s on %s:%d", reads.path, settings.host, port)
    print(f"ready {port}", flush=True)
    await stop.wait()
    await server.stop(1.0)
    reads.close_readers()


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the broker's terminal is the broker's to handle
    keep_freed_memory()
    asyncio.run(serve(load_settings(sys.argv[1:], os.environ)))


if __name__ == "__main__":
    main()
