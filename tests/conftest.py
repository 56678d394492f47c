from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import BrokerThread, FakeClock, broker_settings


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(tmp_path: Path, clock: FakeClock) -> Iterator[BrokerThread]:
    """A broker on a fake clock; the test runs check rounds itself with ``broker.check_once()``."""
    running = BrokerThread(broker_settings(tmp_path / "data"), clock)
    yield running
    running.stop()
