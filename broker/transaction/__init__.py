"""Half messages: the transaction service, the producer registry and the check service."""
