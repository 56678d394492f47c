"""halfmq producer SDK."""
