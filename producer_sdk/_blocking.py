"""Bases of the blocking clients: ``with`` that closes them, and a BrokerClient made on the
process's SDK loop."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

from producer_sdk._client import BrokerClient, TlsCa
from producer_sdk._loop import sdk_loop


async def _make_client(broker: str, timeout: float, token: str | None, tls_ca: TlsCa) -> BrokerClient:
    """Channels belong to the loop they are made on."""
    return BrokerClient(broker, timeout=timeout, token=token, tls_ca=tls_ca)


class Closing(ABC):
    """A blocking client used as ``with``: the block's end closes it."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class BlockingClient(Closing):
    def __init__(self, *, broker: str, timeout: float, token: str | None, tls_ca: TlsCa) -> None:
        self._loop = sdk_loop()
        self._client = self._loop.run(_make_client(broker, timeout, token, tls_ca))

    def _call(self, method: str, request: Any) -> Any:
        return self._loop.run(self._client.call(method, request))

    def close(self) -> None:
        self._loop.run(self._client.close())
