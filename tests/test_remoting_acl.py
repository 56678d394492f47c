"""RocketMQ's ACL signature on halfmq's remoting broker when it has an auth token: RocketMQ's
classic Java client signing with the token as secret key (AclClientRPCHook) is served, one with
another key or none is refused NO_PERMISSION, and a refused request stores nothing. The name
server, as RocketMQ's, answers anyone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from broker.remoting import acl
from halfmq_peers.java import java_program
from halfmq_peers.rocketmq import CLASSIC_CLIENT
from halfmq_testing import EmbeddedBroker
from tests.support import BrokerThread, broker_settings
from tests.test_remoting import ROUTE, SEND_V2, Client, properties, tables

PROGRAM = Path(__file__).resolve().parent / "conformance" / "programs" / "RmqClassicAclJava.java"
TOKEN = "s3cret"


def send_fields(body_id: str) -> dict[str, object]:
    return {"a": "app", "b": "orders", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0,
            "i": properties(UNIQ_KEY=body_id), "j": 0, "k": "false", "m": "false"}  # fmt: skip


def test_a_request_signed_with_the_token_is_served_and_any_other_refused_storing_nothing(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token=TOKEN))
    try:
        client = Client(broker.broker.remoting_port)
        before = tables(broker.broker.store.path)
        assert client.call(SEND_V2, b"unsigned", **send_fields("U1")).code == 16
        wrong = {**send_fields("W1"), acl.ACCESS_KEY: "ak"}
        wrong[acl.SIGNATURE] = acl.signature({k: str(v) for k, v in wrong.items()}, b"wrong key", "not-the-token")
        refused = client.call(SEND_V2, b"wrong key", **wrong)
        assert refused.code == 16 and "does not match" in refused.remark
        assert tables(broker.broker.store.path) == before
        signed = {**send_fields("S1"), acl.ACCESS_KEY: "ak"}
        signed[acl.SIGNATURE] = acl.signature({k: str(v) for k, v in signed.items()}, b"signed", TOKEN)
        assert client.call(SEND_V2, b"signed", **signed).code == 0  # the same connection, still served
        names = Client(broker.broker.namesrv_port)
        assert json.loads(names.call(ROUTE, topic="orders").body)["queueDatas"][0]["writeQueueNums"] == 4
    finally:
        broker.stop()


@pytest.mark.e2e
@pytest.mark.slow
def test_the_java_client_signing_with_the_token_sends_and_reads_and_others_are_refused(tmp_path):
    command = java_program(PROGRAM, [CLASSIC_CLIENT])
    with EmbeddedBroker(data_dir=tmp_path, topics=["orders:2"], flags={"auth_token": TOKEN}) as broker:
        ran = subprocess.run([*command, broker.namesrv_endpoint, "orders", TOKEN], capture_output=True, text=True,
                             timeout=240)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    outcome = json.loads(ran.stdout.strip().splitlines()[-1])
    assert outcome == {"signed": "SEND_OK", "wrong_key": "client refused 16", "unsigned": "client refused 16",
                       "read": ["signed"]}  # fmt: skip
