"""Fetch, one after another, what the tests download from Maven Central on first use: the real
brokers' jars, Kafka's tools, and every Java client program (its library fetched, the program
compiled), into the caches the tests read.

``scripts/test.sh`` runs it in the background during the first phase, so that on a fresh machine
the downloads overlap that phase's computing instead of holding one of its workers, or all four
of the conformance phase waiting on a broker's start. Usage: python -m tests.conformance.fetch
"""

from __future__ import annotations

import time

from halfmq_peers import kafka, rocketmq
from halfmq_peers.java import java_program
from tests import (
    test_conformance_kafka,
    test_conformance_kafka_tools,
    test_conformance_mqadmin,
    test_conformance_rocketmq,
    test_conformance_rocketmq_classic,
    test_remoting_acl,
    test_remoting_crashes,
)


def main() -> None:
    classic = test_conformance_rocketmq_classic
    steps = {
        "Apache Kafka": kafka.broker_classpath,
        "Apache RocketMQ": rocketmq.broker_classpath,
        "KafkaJava": lambda: java_program(
            test_conformance_kafka.PROGRAMS / "KafkaJava.java", test_conformance_kafka.KAFKA_JAVA
        ),
        "KafkaTools": lambda: java_program(test_conformance_kafka_tools.PROGRAM, kafka.TOOLS_ARTIFACTS),
        "MqAdmin": lambda: java_program(test_conformance_mqadmin.PROGRAM, test_conformance_mqadmin.TOOLS_ARTIFACTS),
        "Rmq5Java": lambda: java_program(
            test_conformance_rocketmq.PROGRAMS / "Rmq5Java.java", [test_conformance_rocketmq.JAVA_CLIENT]
        ),
        "RmqClassicJava": lambda: java_program(classic.PROGRAMS / "RmqClassicJava.java", [rocketmq.CLASSIC_CLIENT]),
        "RmqClassicJava (4.x)": lambda: java_program(classic.PROGRAMS / "RmqClassicJava.java", [classic.JAVA_CLIENT_4]),
        "RmqSpring": lambda: java_program(classic.PROGRAMS / "RmqSpring.java", [classic.SPRING_STARTER]),
        "RmqClassicAclJava": lambda: java_program(test_remoting_acl.PROGRAM, [rocketmq.CLASSIC_CLIENT]),
        "RmqClassicCrashJava": lambda: java_program(test_remoting_crashes.PROGRAM, [rocketmq.CLASSIC_CLIENT]),
    }
    for name, step in steps.items():
        began = time.monotonic()
        step()
        print(f"{name}: {time.monotonic() - began:.1f} s", flush=True)


if __name__ == "__main__":
    main()
