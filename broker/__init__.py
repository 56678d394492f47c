"""halfmq broker: a RocketMQ-style transactional ("half") message broker."""
