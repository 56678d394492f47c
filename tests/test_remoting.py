"""RocketMQ's classic remoting protocol on halfmq's name server and remoting broker, spoken by a
small raw client: frames as RocketMQ's Java client writes them, messages read back as
MessageDecoder reads them. The official Java client judges the same ports in
test_conformance_rocketmq_classic.py."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import prometheus_client
import pytest

from broker.errors import GroupNotEmpty
from broker.model import MessageType
from broker.remoting.frame import Command, Encoding, decode, encode
from tests.support import BrokerThread, broker_settings

SEND_V2, PULL, END, HEART_BEAT, CHECK, ROUTE = 310, 11, 37, 34, 39, 105
SEND_BATCH, QUERY_OFFSET, CONSUMER_LIST, NOTIFY, SEND_BACK, LOCK, UNLOCK = 320, 14, 38, 40, 36, 41, 42
CHECK_CLIENT_CONFIG, UPDATE_OFFSET, CONSUME_STATS = 46, 15, 208


class Client:
    """One connection; requests answered by opaque, the broker's own requests kept aside."""

    def __init__(self, port: int, encoding: Encoding = Encoding.JSON) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.encoding = encoding
        self.opaque = 0
        self.pushed: list[Command] = []

    def call(self, code: int, body: bytes = b"", version: int = 479, **fields: object) -> Command:
        self.opaque += 1
        request = Command(code=code, opaque=self.opaque, fields={k: str(v) for k, v in fields.items()}, body=body,
                          language="JAVA", version=version, encoding=self.encoding)  # fmt: skip
        self.sock.sendall(encode(request))
        while True:
            reply = self.read()
            if reply.is_response and reply.opaque == self.opaque:
                return reply
            self.pushed.append(reply)

    def oneway(self, code: int, **fields: object) -> None:
        self.sock.sendall(encode(Command(code=code, flag=2, fields={k: str(v) for k, v in fields.items()})))

    def read(self) -> Command:
        (size,) = struct.unpack(">i", self.recv(4))
        return decode(self.recv(size))

    def recv(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data


def properties(**values: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in values.items())


def read_messages(body: bytes) -> Iterator[dict[str, Any]]:
    """MessageDecoder.decode's reading of a pull body, IPv4 hosts."""
    at = 0
    while at < len(body):
        size, magic, _, queue_id, _, queue_offset, physical, sys_flag, _ = struct.unpack_from(">iiiiiqqiq", body, at)
        assert magic == -626843481
        cursor = at + 48 + 8 + 8 + 8 + 4 + 8
        store_host = body[at + 48 + 16 : at + 48 + 24]
        (reconsume_times,) = struct.unpack_from(">i", body, at + 48 + 24)
        (length,) = struct.unpack_from(">i", body, cursor)
        payload = body[cursor + 4 : cursor + 4 + length]
        cursor += 4 + length
        topic_length = body[cursor]
        topic = body[cursor + 1 : cursor + 1 + topic_length].decode()
        cursor += 1 + topic_length
        (props_length,) = struct.unpack_from(">h", body, cursor)
        props = body[cursor + 2 : cursor + 2 + props_length].decode()
        assert cursor + 2 + props_length - at == size
        yield {
            "topic": topic, "queue_id": queue_id, "queue_offset": queue_offset, "body": payload,
            "properties": dict(p.split("\x01") for p in props.split("\x02") if p), "sys_flag": sys_flag,
            "msg_id": (store_host + struct.pack(">q", physical)).hex().upper(), "reconsume_times": reconsume_times,
            "physical": physical,
        }  # fmt: skip
        at += size


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[BrokerThread]:
    running = BrokerThread(broker_settings(tmp_path, check_interval=3600.0, transaction_timeout=0.1))
    yield running
    running.stop()


def send(client: Client, topic: str, queue_id: int, body: bytes, **props: str) -> Command:
    return client.call(SEND_V2, body, a="app", b=topic, c="TBW102", d=4, e=queue_id, f=0,
                       g=int(time.time() * 1000), h=0, i=properties(**props), j=0, k="false", m="false")  # fmt: skip


def pull(client: Client, topic: str, queue_id: int, offset: int = 0, subscription: str = "*") -> Command:
    return client.call(PULL, consumerGroup="readers", topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=32,
                       sysFlag=0, commitOffset=0, suspendTimeoutMillis=0, subscription=subscription, subVersion=0,
                       expressionType="TAG")  # fmt: skip


def test_the_name_server_routes_a_topic_to_the_remoting_broker_in_the_json_each_client_reads(broker):
    names = Client(broker.broker.namesrv_port)
    route = names.call(ROUTE, topic="orders", acceptStandardJsonOnly="true")
    data = json.loads(route.body)
    assert route.code == 0
    assert data["brokerDatas"][0]["brokerAddrs"] == {"0": f"127.0.0.1:{broker.broker.remoting_port}"}
    assert data["queueDatas"][0]["writeQueueNums"] == 4 and data["queueDatas"][0]["perm"] == 6
    legacy = names.call(ROUTE, version=100, topic="orders")
    assert b'"brokerAddrs":{0:"127.0.0.1:' in legacy.body  # fastjson's form, for clients before 4.9.4
    assert names.call(ROUTE, topic="nowhere").code == 17  # TOPIC_NOT_EXIST: the client falls back to TBW102
    assert names.call(ROUTE, topic="RMQ_SYS_TRANS_HALF_TOPIC").code == 17
    assert names.call(ROUTE, topic="TBW102").code == 0  # topics are created on first use by default


def test_a_sent_message_is_pulled_back_with_its_keys_tags_properties_and_offset_message_id(broker):
    client = Client(broker.broker.remoting_port, Encoding.ROCKETMQ)
    sent = send(client, "orders", 2, b"o-1 created", UNIQ_KEY="ID1", KEYS="o-1 c-9", TAGS="created", region="eu")
    assert sent.code == 0 and sent.fields["queueId"] == "2" and sent.fields["queueOffset"] == "0"
    assert send(client, "orders", 2, b"o-2 paid", UNIQ_KEY="ID2", TAGS="paid").code == 0
    found = list(read_messages(pull(client, "orders", 2).body))
    assert [m["body"] for m in found] == [b"o-1 created", b"o-2 paid"]
    first = found[0]
    assert first["properties"] == {"UNIQ_KEY": "ID1", "KEYS": "o-1 c-9", "TAGS": "created", "region": "eu"}
    assert (first["topic"], first["queue_id"], first["queue_offset"]) == ("orders", 2, 0)
    assert first["msg_id"] == sent.fields["msgId"]  # the offset message id names the message's place
    filtered = pull(client, "orders", 2, subscription="paid")
    assert [m["body"] for m in read_messages(filtered.body)] == [b"o-2 paid"]
    assert pull(client, "orders", 2, offset=2).code == 19  # PULL_NOT_FOUND at the queue's end
    assert pull(client, "orders", 2, offset=9).code == 21  # PULL_OFFSET_MOVED past it
    metrics = prometheus_client.generate_latest(broker.broker.metrics.registry).decode()
    assert 'halfmq_remoting_requests_total{code="310",listener="remoting"} 2.0' in metrics  # by request code


def test_a_pull_from_below_what_retention_kept_is_moved_to_the_queue_s_low_offset(tmp_path, clock):
    broker = BrokerThread(broker_settings(tmp_path / "data", retention=60), clock)
    try:
        client = Client(broker.broker.remoting_port)
        for n in range(3):
            assert send(client, "orders", 1, b"old", UNIQ_KEY=f"OLD{n}").code == 0
        clock.advance(61)
        assert send(client, "orders", 1, b"new", UNIQ_KEY="NEW").code == 0
        assert broker.run(broker.broker.retention.sweep()).messages == 3
        moved = pull(client, "orders", 1, offset=1)
        assert moved.code == 21  # PULL_OFFSET_MOVED
        assert (moved.fields["nextBeginOffset"], moved.fields["minOffset"], moved.fields["maxOffset"]) == (
            "3",
            "3",
            "4",
        )
        assert [m["body"] for m in read_messages(pull(client, "orders", 1, offset=3).body)] == [b"new"]
    finally:
        broker.stop()


def test_a_typed_topic_takes_a_classic_client_s_messages_of_any_type_as_rocketmq_s_broker_does(broker):
    broker.run(broker.broker.messaging.create_topic("timers", 1, message_type=MessageType.DELAY))
    client = Client(broker.broker.remoting_port)
    assert send(client, "timers", 0, b"now", UNIQ_KEY="T1").code == 0  # a NORMAL message
    assert half(client, "timers", "T2").code == 0  # a half message
    assert [m["body"] for m in read_messages(pull(client, "timers", 0).body)] == [b"now"]


def test_a_timer_message_says_when_it_was_due_and_a_delay_level_s_does_not_as_rocketmq_s_broker(broker):
    client = Client(broker.broker.remoting_port)
    due = int(time.time() * 1000) + 500
    assert send(client, "orders", 0, b"timer", UNIQ_KEY="T1", TIMER_DELIVER_MS=str(due)).code == 0
    assert send(client, "orders", 0, b"level", UNIQ_KEY="L1", DELAY="1").code == 0
    time.sleep(1.5)
    found = {m["body"]: m["properties"] for m in read_messages(pull(client, "orders", 0).body)}
    assert found == {b"timer": {"UNIQ_KEY": "T1", "TIMER_DELIVER_MS": str(due)}, b"level": {"UNIQ_KEY": "L1"}}


def test_a_topic_a_producer_names_first_is_created_with_the_queues_it_asks_for(broker):
    client = Client(broker.broker.remoting_port)
    assert send(client, "fresh", 1, b"x", UNIQ_KEY="F1").code == 0
    names = Client(broker.broker.namesrv_port)
    assert json.loads(names.call(ROUTE, topic="fresh").body)["queueDatas"][0]["writeQueueNums"] == 4


def test_pulls_are_filtered_by_the_sql92_subscription_they_carry_else_by_the_one_their_group_registered(broker):
    client = Client(broker.broker.remoting_port)
    for n in range(6):
        assert send(client, "orders", 0, b"m%d" % n, UNIQ_KEY=f"S{n}", TAGS="a" if n % 2 else "b", n=str(n)).code == 0

    def filtered(group: str, flags: int, expression: str) -> Command:
        return client.call(PULL, consumerGroup=group, topic="orders", queueId=0, queueOffset=0, maxMsgNums=32,
                           sysFlag=flags, subscription=expression, subVersion=0, expressionType="SQL92")  # fmt: skip

    carried = filtered("carried", 0x4, "n >= 3 AND TAGS = 'a'")  # PullSysFlag's subscription flag
    assert [m["body"] for m in read_messages(carried.body)] == [b"m3", b"m5"]
    assert carried.fields["nextBeginOffset"] == "6"
    # A push consumer's pulls carry no subscription: the one its group's heartbeat registered counts.
    heartbeat = {"clientID": "push-1", "producerDataSet": [], "consumerDataSet": [
        {"groupName": "pushers", "subscriptionDataSet": [
            {"topic": "orders", "subString": "n < 2", "expressionType": "SQL92"}]}]}  # fmt: skip
    joined = client.call(HEART_BEAT, json.dumps(heartbeat).encode())
    # RocketMQ 5.5.0's version: the Java client pulls by SQL92 only from a broker of 4.1.0 or later.
    assert (joined.code, joined.version) == (0, 514)
    assert [m["body"] for m in read_messages(filtered("pushers", 0, "*").body)] == [b"m0", b"m1"]
    none_passes = filtered("carried", 0x4, "n > 100")
    assert (none_passes.code, none_passes.fields["nextBeginOffset"]) == (20, "6")  # PULL_RETRY_IMMEDIATELY

    def checked(expression: str, kind: str = "SQL92") -> Command:
        config = {"clientId": "push-1", "group": "pushers",
                  "subscriptionData": {"topic": "orders", "subString": expression, "expressionType": kind}}  # fmt: skip
        return client.call(CHECK_CLIENT_CONFIG, json.dumps(config).encode())

    assert checked("n BETWEEN 1 AND 2").code == 0 and checked("a || b", "TAG").code == 0
    refused = checked("n > 'x'")
    assert (refused.code, refused.remark) == (23, "'x' cannot be compared by order (>, >=, <, <=, BETWEEN)")
    assert filtered("carried", 0x4, "n >").code == 23  # SUBSCRIPTION_PARSE_FAILED


def join_readers(client: Client, client_id: str) -> Command:
    """A heartbeat naming ``client_id`` a member of consumer group ``readers`` of ``orders``."""
    heartbeat = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [
        {"groupName": "readers", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "subscriptionDataSet": [{"topic": "orders", "subString": "*"}]}]}  # fmt: skip
    return client.call(HEART_BEAT, json.dumps(heartbeat).encode())


def half(client: Client, topic: str, key: str, group: str = "txn-app") -> Command:
    props = properties(UNIQ_KEY=key, TRAN_MSG="true", PGROUP=group)
    return client.call(SEND_V2, b"order " + key.encode(), a=group, b=topic, c="TBW102", d=4, e=0, f=4, g=0, h=0,
                       i=props, j=0, k="false", m="false")  # fmt: skip


def test_a_half_message_is_delivered_once_committed_and_never_when_rolled_back(broker):
    client = Client(broker.broker.remoting_port)
    for key, end in (("K-COMMIT", 8), ("K-ROLLBACK", 12)):
        sent = half(client, "orders", key)
        assert sent.code == 0 and sent.fields["transactionId"] == key
        held = [m for m in read_messages(pull(client, "orders", 0).body) if m["properties"]["UNIQ_KEY"] == key]
        assert held == []
        client.oneway(END, producerGroup="txn-app", tranStateTableOffset=sent.fields["queueOffset"],
                      commitLogOffset=0, commitOrRollback=end, fromTransactionCheck="false", msgId=key,
                      transactionId=key)  # fmt: skip
    deadline = time.monotonic() + 10
    while not (found := list(read_messages(pull(client, "orders", 0).body))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [m["body"] for m in found] == [b"order K-COMMIT"]
    assert found[0]["properties"]["__transactionId__"] == "K-COMMIT"  # as RocketMQ's committed messages carry it
    assert broker.run(broker.broker.transactions.transaction_of_message("K-ROLLBACK")).state.value == "ROLLED_BACK"


def test_a_producer_is_checked_on_its_own_connection_and_its_answer_ends_the_transaction(broker):
    client = Client(broker.broker.remoting_port)
    heartbeat = {"clientID": "127.0.0.1@1", "producerDataSet": [{"groupName": "txn-app"}], "consumerDataSet": []}
    assert client.call(HEART_BEAT, json.dumps(heartbeat).encode()).code == 0
    half(client, "orders", "K-CHECKED")
    time.sleep(0.2)  # older than the transaction timeout
    broker.check_once()
    check = client.pushed.pop() if client.pushed else client.read()
    assert check.code == CHECK and check.oneway
    (message,) = read_messages(check.body)
    assert message["topic"] == "orders"  # the real topic, never the half topic
    assert message["properties"]["PGROUP"] == "txn-app" and check.fields["transactionId"] == "K-CHECKED"
    client.oneway(END, producerGroup="txn-app", tranStateTableOffset=check.fields["tranStateTableOffset"],
                  commitLogOffset=check.fields["commitLogOffset"], commitOrRollback=8, fromTransactionCheck="true",
                  msgId="K-CHECKED", transactionId="K-CHECKED")  # fmt: skip
    deadline = time.monotonic() + 10
    while not list(read_messages(pull(client, "orders", 0).body)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [m["body"] for m in read_messages(pull(client, "orders", 0).body)] == [b"order K-CHECKED"]
    assert broker.run(broker.broker.transactions.transaction_of_message("K-CHECKED")).check_times == 1


def tables(path: Any) -> dict[str, list[Any]]:
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: conn.execute(f'SELECT * FROM "{name}"').fetchall() for name in names}


@pytest.mark.parametrize("port", ["namesrv_port", "remoting_port"])
def test_bad_frames_close_their_own_connection_only_and_change_nothing(broker, port):
    target = getattr(broker.broker, port)
    served = Client(target)
    before = tables(broker.broker.store.path)
    for bad in (struct.pack(">i", 2**31 - 1), struct.pack(">i", 2), struct.pack(">ii", 8, 4) + b"{no!",
                struct.pack(">ii", 8, 5 << 24 | 4) + b"abcd", struct.pack(">i", 100) + b"short"):  # fmt: skip
        with socket.create_connection(("127.0.0.1", target), timeout=10) as sock:
            sock.sendall(bad)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(100) == b""  # closed without an answer
    unknown = served.call(9999)
    assert unknown.code == 3 and "9999" in (unknown.remark or "")  # REQUEST_CODE_NOT_SUPPORTED
    if port == "remoting_port":
        refused = send(served, "RMQ_SYS_TRANS_HALF_TOPIC", 0, b"sneak", UNIQ_KEY="S1")
        assert refused.code == 16  # NO_PERMISSION
        assert send(served, "orders", 9, b"nowhere", UNIQ_KEY="S2").code == 13  # no queue 9: MESSAGE_ILLEGAL
    assert served.call(ROUTE, topic="orders").code in (0, 3)  # the connection still served
    assert tables(broker.broker.store.path) == before


def test_a_consumer_group_s_members_are_listed_and_told_when_one_joins_or_leaves(broker):
    def join(client_id: str) -> Client:
        member = Client(broker.broker.remoting_port)
        assert join_readers(member, client_id).code == 0
        return member

    first = join("c-1")
    second = join("c-2")
    notice = first.read()
    assert (notice.code, notice.oneway, notice.fields) == (NOTIFY, True, {"consumerGroup": "readers"})
    listed = first.call(CONSUMER_LIST, consumerGroup="readers")
    assert json.loads(listed.body) == {"consumerIdList": ["c-1", "c-2"]}
    second.sock.close()
    assert first.read().code == NOTIFY  # the one left is told too
    assert json.loads(first.call(CONSUMER_LIST, consumerGroup="readers").body) == {"consumerIdList": ["c-1"]}


def test_a_batch_without_message_ids_is_stored_with_ids_the_broker_made(broker):
    client = Client(broker.broker.remoting_port)
    body = b""
    for text in (b"b-0", b"b-1"):
        props = properties(TAGS="batch").encode()
        body += struct.pack(">iiiii", 20 + len(text) + 2 + len(props), 0, 0, 0, len(text)) + text
        body += struct.pack(">h", len(props)) + props
    sent = client.call(SEND_BATCH, body, a="app", b="orders", c="TBW102", d=4, e=1, f=0, g=0, h=0, i="", j=0,
                       k="false", m="true")  # fmt: skip
    assert sent.code == 0 and len(sent.fields["msgId"].split(",")) == 2
    found = list(read_messages(pull(client, "orders", 1).body))
    assert [m["body"] for m in found] == [b"b-0", b"b-1"]
    assert len({m["properties"]["UNIQ_KEY"] for m in found}) == 2


def test_a_new_group_reads_a_queue_from_0_only_once_the_queue_holds_a_message(broker):
    client = Client(broker.broker.remoting_port)

    def query() -> Command:
        return client.call(QUERY_OFFSET, consumerGroup="new-group", topic="orders", queueId=3)

    assert query().code == 22  # QUERY_NOT_FOUND in an empty queue, as RocketMQ's broker answers
    send(client, "orders", 3, b"first", UNIQ_KEY="Q1")
    assert (query().code, query().fields["offset"]) == (0, "0")


def trace(broker: BrokerThread, message_id: str) -> dict[str, tuple[str, int, list[str]]]:
    """Each consumer group's part in a message, as the admin API traces it."""
    groups = httpx.get(f"{broker.http}/messages/{message_id}/trace").json()["groups"]
    return {g["group"]: (g["state"], g["attempts"], [c["topic"] for c in g["copies"]]) for g in groups}


def test_a_failed_message_sent_back_comes_again_through_the_group_s_retry_topic_then_goes_to_its_dead_letters(broker):
    client = Client(broker.broker.remoting_port)
    assert join_readers(client, "c-1").code == 0
    names = Client(broker.broker.namesrv_port)
    retry = json.loads(names.call(ROUTE, topic="%RETRY%readers").body)  # made at the group's first heartbeat
    assert retry["queueDatas"][0]["readQueueNums"] == 1
    # queue 0, offset 0: the same place as its copy's in the retry topic, which a send-back tells apart
    assert send(client, "orders", 0, b"o-1", UNIQ_KEY="ID1", KEYS="o-1", TAGS="created", region="eu").code == 0
    (first,) = read_messages(pull(client, "orders", 0).body)

    def send_back(message: dict[str, Any], delay_level: int, most: int) -> Command:
        return client.call(SEND_BACK, offset=message["physical"], group="readers", delayLevel=delay_level,
                           originMsgId=message["properties"]["UNIQ_KEY"], originTopic="orders", unitMode="false",
                           maxReconsumeTimes=most)  # fmt: skip

    assert send_back(first, 1, 2).code == 0  # delay level 1: a second
    assert pull(client, "%RETRY%readers", 0).code == 19  # not due yet
    time.sleep(1.5)
    (again,) = read_messages(pull(client, "%RETRY%readers", 0).body)
    assert (again["body"], again["reconsume_times"]) == (b"o-1", 1)
    assert trace(broker, "ID1") == {"readers": ("RETRYING", 1, ["%RETRY%readers"])}
    # no TIMER_DELIVER_MS: a retry is delayed by a level, which RocketMQ's broker does not state
    assert again["properties"] == {"UNIQ_KEY": "ID1", "KEYS": "o-1", "TAGS": "created", "region": "eu",
                                   "RETRY_TOPIC": "orders", "ORIGIN_MESSAGE_ID": "ID1"}  # fmt: skip
    assert send_back(again, 1, 1).code == 0  # consumed again once, as often as allowed: a dead letter
    (letter,) = read_messages(pull(client, "%DLQ%readers", 0).body)
    assert (letter["body"], letter["reconsume_times"], letter["properties"]["UNIQ_KEY"]) == (b"o-1", 2, "ID1")
    assert letter["properties"]["RETRY_TOPIC"] == "orders"
    assert trace(broker, "ID1") == {"readers": ("DEAD_LETTERED", 2, ["%RETRY%readers", "%DLQ%readers"])}
    (found,) = httpx.get(f"{broker.http}/messages/ID1").json()  # the operator finds it by its id and key
    assert found["topic"] == "orders" and found in httpx.get(f"{broker.http}/messages", params={"key": "o-1"}).json()
    unknown = client.call(SEND_BACK, offset=first["physical"], group="readers", delayLevel=0, originMsgId="NOPE",
                          originTopic="orders")  # fmt: skip
    assert unknown.code == 1 and "look message by offset failed" in unknown.remark


def queue_locks(client: Client, code: int, client_id: str, *queues: int) -> Command:
    """LOCK_BATCH_MQ or UNLOCK_BATCH_MQ of queues of ``orders`` for ``client_id`` of group ``readers``."""
    body = {"consumerGroup": "readers", "clientId": client_id, "onlyThisBroker": False,
            "mqSet": [{"topic": "orders", "brokerName": "halfmq", "queueId": q} for q in queues]}  # fmt: skip
    return client.call(code, json.dumps(body).encode())


def locked(client: Client, client_id: str, *queues: int) -> list[int]:
    """The queues ``client_id`` holds after asking to lock ``queues``."""
    answer = queue_locks(client, LOCK, client_id, *queues)
    return sorted(mq["queueId"] for mq in json.loads(answer.body)["lockOKMQSet"])


def test_a_queue_lock_not_renewed_for_a_minute_passes_to_the_next_client_that_asks(tmp_path, clock):
    broker = BrokerThread(broker_settings(tmp_path / "data"), clock)
    try:
        client = Client(broker.broker.remoting_port)
        assert join_readers(client, "c-1").code == 0
        assert locked(client, "c-1", 0, 1) == [0, 1]
        clock.advance(59)
        assert locked(client, "c-1", 0) == [0]  # renewed; queue 1's lock is not
        assert locked(client, "c-2", 0, 1) == []
        clock.advance(2)
        assert locked(client, "c-2", 0, 1) == [1]  # 61 s after c-1 last renewed it
        assert locked(client, "c-1", 0, 1) == [0]
    finally:
        broker.stop()


def test_orderly_consumers_lock_queues_one_client_each_and_a_locking_group_s_retries_become_dead_letters(broker):
    client = Client(broker.broker.remoting_port)
    assert join_readers(client, "c-1").code == 0

    def locks(code: int, client_id: str, *queues: int) -> Command:
        return queue_locks(client, code, client_id, *queues)

    def resend(body: bytes, reconsumed: int) -> Command:  # a consumer's own send to its retry topic
        return client.call(SEND_V2, body, a="readers", b="%RETRY%readers", c="TBW102", d=1, e=0, f=0,
                           g=int(time.time() * 1000), h=0, i=properties(UNIQ_KEY="R1", RETRY_TOPIC="orders"),
                           j=reconsumed, k="false", l=16)  # fmt: skip

    assert locked(client, "c-1", 0, 1) == [0, 1]
    assert locked(client, "c-2", 1, 2) == [2]  # queue 1 is c-1's
    assert locked(client, "c-1", 0, 1) == [0, 1]  # renewed
    assert resend(b"given up", 1).code == 0  # the group consumes in order: straight to its dead letters
    assert locks(UNLOCK, "c-1", 0, 1).code == 0 and locks(UNLOCK, "c-2", 2).code == 0
    assert locked(client, "c-2", 1) == [1]  # free again
    assert locks(UNLOCK, "c-2", 1).code == 0
    assert resend(b"again", 1).code == 0
    assert resend(b"too often", 17).code == 0  # consumed again more than the 16 times allowed
    (again,) = read_messages(pull(client, "%RETRY%readers", 0).body)
    assert (again["body"], again["reconsume_times"], again["properties"]["UNIQ_KEY"]) == (b"again", 1, "R1")
    letters = list(read_messages(pull(client, "%DLQ%readers", 0).body))
    assert [(m["body"], m["reconsume_times"]) for m in letters] == [(b"given up", 1), (b"too often", 17)]
    assert {m["properties"]["RETRY_TOPIC"] for m in letters} == {"orders"}


def test_deleting_a_group_or_a_topic_drops_its_pull_offsets_as_rocketmq_s_broker_does(broker):
    """GET_CONSUME_STATS shows how far a group's pulls reached; once the group, or the topic, is
    deleted, what was pulled before is gone (RocketMQ's removeOffset and cleanOffsetByTopic)."""
    client, http = Client(broker.broker.remoting_port), broker.http

    def pulled_after_committing_0() -> int:
        assert client.call(UPDATE_OFFSET, consumerGroup="readers", topic="orders", queueId=2, commitOffset=0).code == 0
        stats = client.call(CONSUME_STATS, consumerGroup="readers", topic="orders")
        pulled = re.search(r'"queueId":2,"topic":"orders"\}:\{[^}]*"pullOffset":(\d+)', stats.body.decode())
        assert pulled is not None, stats.body
        return int(pulled.group(1))

    for _ in range(2):
        assert send(client, "orders", 2, b"o").code == 0
    assert len(list(read_messages(pull(client, "orders", 2).body))) == 2
    assert pulled_after_committing_0() == 2
    httpx.delete(f"{http}/consumers/readers").raise_for_status()
    assert pulled_after_committing_0() == 0
    assert len(list(read_messages(pull(client, "orders", 2).body))) == 2
    httpx.delete(f"{http}/topics/orders").raise_for_status()
    httpx.post(f"{http}/topics", json={"name": "orders", "queues": 4}).raise_for_status()
    assert send(client, "orders", 2, b"o").code == 0
    assert pulled_after_committing_0() == 0


def test_a_live_group_s_offsets_are_deleted_only_in_topics_its_subscription_does_not_name(broker):
    """As Kafka's OffsetDelete judges a running group: a topic the group no longer consumes can
    be cleared; the one its members' heartbeats subscribe to, not."""
    client, operators = Client(broker.broker.remoting_port), broker.broker.operators
    httpx.post(f"{broker.http}/topics", json={"name": "old", "queues": 1}).raise_for_status()
    for topic in ("orders", "old"):
        assert send(client, topic, 0, b"o").code == 0
        assert client.call(UPDATE_OFFSET, consumerGroup="readers", topic=topic, queueId=0, commitOffset=1).code == 0
    assert join_readers(client, "reader-1").code == 0
    with pytest.raises(GroupNotEmpty, match="live consumer"):
        broker.run(operators.delete_offsets("readers", "orders", [0]))
    broker.run(operators.delete_offsets("readers", "old", [0]))
    rows = httpx.get(f"{broker.http}/consumers").json()["items"]
    assert {(row["topic"], row["queue_id"]) for row in rows if row["group"] == "readers"} == {("orders", 0)}
