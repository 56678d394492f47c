"""What both RocketMQ front ends (RocketMQ 5's gRPC, ``rocketmq_api``; the classic remoting
protocol, ``remoting``) share, so that they cannot drift apart: tag filters, for now."""
