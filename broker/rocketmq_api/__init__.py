"""RocketMQ 5 compatibility: ``apache.rocketmq.v2.MessagingService`` over the same core.

Optional (``halfmq[rocketmq]``): the protobuf/gRPC modules are those the official Python client
ships, loaded by ``protocol.load`` without running that package's import-time side effects.
"""
