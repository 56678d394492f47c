"""``halfmq``: the operator's command line (RocketMQ's mqadmin for halfmq), a client of the admin API."""
