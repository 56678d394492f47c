"""The pytest plugin (entry point ``pytest11``): a real broker per test, or one per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from halfmq_testing.embedded import EmbeddedBroker


@pytest.fixture
def halfmq_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A broker process of this test's own, test controls on, discarded after it."""
    broker = EmbeddedBroker(data_dir=tmp_path_factory.mktemp("halfmq")).start()
    yield broker
    broker.discard()


@pytest.fixture(scope="session")
def halfmq_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One broker for the whole session; ``.reset()`` gives a test an empty one."""
    broker = EmbeddedBroker(data_dir=tmp_path_factory.mktemp("halfmq-session")).start()
    yield broker
    broker.discard()
