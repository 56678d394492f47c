"""The pytest plugin (entry point ``pytest11``): a halfmq broker per test, or one per session;
and the real brokers, Apache RocketMQ 5 and Apache Kafka, once per run (``rocketmq_peer``,
``kafka_peer``).

Topics the brokers start with come from the ini option ``halfmq_topics`` (``NAME[:QUEUES]``
specs separated by spaces or lines) and, for ``halfmq_broker``, from the test's
``@pytest.mark.halfmq_topics("orders:4", ...)`` marker too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from halfmq_testing import peers
from halfmq_testing.embedded import EmbeddedBroker

TOPICS = "halfmq_topics"
PEER_CONFIG = {"rocketmq": "halfmq_rocketmq_config", "kafka": "halfmq_kafka_config"}
_RUN = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(TOPICS, "topics (NAME[:QUEUES], space-separated) every halfmq broker fixture starts with", "args")
    parser.addini(PEER_CONFIG["rocketmq"], "KEY=VALUE lines for the real RocketMQ's broker.conf", "linelist")
    parser.addini(PEER_CONFIG["kafka"], "KEY=VALUE lines for the real Kafka's server.properties", "linelist")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{TOPICS}(*specs): topics (NAME[:QUEUES]) this test's broker starts with")
    if not hasattr(config, "workerinput"):  # the controlling process, with or without xdist workers
        config.stash[_RUN] = peers.open_run()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _RUN in config.stash:
        peers.close_run(config.stash[_RUN])


def _peer(name: str, config: pytest.Config) -> peers.RunningPeer:
    settings = dict(line.partition("=")[::2] for line in config.getini(PEER_CONFIG[name]))
    return peers.shared_peer(name, {key.strip(): value.strip() for key, value in settings.items()})


@pytest.fixture(scope="session")
def rocketmq_peer(pytestconfig: pytest.Config) -> peers.RunningPeer:
    """The real Apache RocketMQ 5 (name server, broker and proxy), started once per run and shared
    by every worker: ``.endpoints["proxy"]`` for RocketMQ 5 clients, ``["namesrv"]`` for others."""
    return _peer("rocketmq", pytestconfig)


@pytest.fixture(scope="session")
def kafka_peer(pytestconfig: pytest.Config) -> peers.RunningPeer:
    """The real Apache Kafka (KRaft, one node), started once per run and shared by every worker:
    ``.endpoints["bootstrap"]``."""
    return _peer("kafka", pytestconfig)


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
