"""halfmq as a test tool: a real broker process with test controls, as a context manager
(``EmbeddedBroker``) and as pytest fixtures (``halfmq_broker``, ``halfmq_broker_session``;
the plugin is registered through the ``pytest11`` entry point)."""

from halfmq_testing.embedded import EmbeddedBroker, EmbeddedFaults, free_port

__all__ = ["EmbeddedBroker", "EmbeddedFaults", "free_port"]
