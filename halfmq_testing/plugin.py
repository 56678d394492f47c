"""The pytest plugin (entry point ``pytest11``): a real broker per test, or one per session.

Topics the brokers start with come from the ini option ``halfmq_topics`` (``NAME[:QUEUES]``
specs separated by spaces or lines) and, for ``halfmq_broker``, from the test's
``@pytest.mark.halfmq_topics("orders:4", ...)`` marker too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from halfmq_testing.embedded import EmbeddedBroker

TOPICS = "halfmq_topics"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(TOPICS, "topics (NAME[:QUEUES], space-separated) every halfmq broker fixture starts with", "args")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{TOPICS}(*specs): topics (NAME[:QUEUES]) this test's broker starts with")


@pytest.fixture
def halfmq_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A broker process of this test's own, test controls on, discarded after it."""
    marked = [spec for marker in request.node.iter_markers(TOPICS) for spec in marker.args]
    topics = [*request.config.getini(TOPICS), *marked]
    broker = EmbeddedBroker(topics=topics, data_dir=tmp_path_factory.mktemp("halfmq")).start()
    yield broker
    broker.discard()


@pytest.fixture(scope="session")
def halfmq_broker_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedBroker]:
    """One broker for the whole session; ``.reset()`` gives a test an empty one (with the ini's topics)."""
    broker = EmbeddedBroker(topics=request.config.getini(TOPICS), data_dir=tmp_path_factory.mktemp("halfmq-session"))
    yield broker.start()
    broker.discard()
