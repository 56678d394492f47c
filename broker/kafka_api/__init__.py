"""Kafka's protocol over the same core: a listener (``server``) answering Kafka's clients with the
APIs in ``handlers``, group membership in ``groups``, transactions in ``transactions``, and the
mapping of records to messages in ``records``."""
