"""The interface a transactional producer implements."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from producer_sdk.message import LocalTransactionState, Message, ReceivedMessage

log = logging.getLogger(__name__)


class TransactionListener(ABC):
    """Runs the local transaction and answers the broker's checks.

    ``check_local_transaction`` may be called on any live producer of the group, after a crash
    of the one that sent the message: it must consult durable local state, not memory.
    With ``AsyncRocketMQTransactionProducer`` both methods may be ``async def``. An exception in
    either counts as UNKNOWN.
    """

    @abstractmethod
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Run the local transaction for the half message ``msg``; return its outcome."""

    @abstractmethod
    def check_local_transaction(self, msg: ReceivedMessage) -> LocalTransactionState:
        """Return the outcome of the local transaction behind ``msg`` (a half message)."""


def _checked(value: object, method: Callable[..., Any]) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    log.error("%s returned %r, not a LocalTransactionState; counted as UNKNOWN", method.__qualname__, value)
    return LocalTransactionState.UNKNOWN


def call_listener(method: Callable[..., Any], *args: Any) -> LocalTransactionState:
    """Call a plain listener method; an exception or a wrong return value counts as UNKNOWN."""
    try:
        return _checked(method(*args), method)
    except Exception:
        log.exception("%s raised; counted as UNKNOWN", method.__qualname__)
        return LocalTransactionState.UNKNOWN


async def await_listener(method: Callable[..., Awaitable[Any]], *args: Any) -> LocalTransactionState:
    """As call_listener, for an ``async def`` listener method."""
    try:
        return _checked(await method(*args), method)
    except Exception:
        log.exception("%s raised; counted as UNKNOWN", method.__qualname__)
        return LocalTransactionState.UNKNOWN
