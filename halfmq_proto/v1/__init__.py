"""halfmq native protocol v1, generated from proto/halfmq/v1."""
