"""The dashboard in a real headless Chromium while transactions flow, and its message browser.

Chromium is Debian's (installed here if missing); Playwright's Python package drives it through
``executable_path``, so no browser is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from kafka import KafkaConsumer

from producer_sdk import KafkaTransactionProducer, Message, Producer, PullConsumer, RocketMQTransactionProducer
from tests.support import BrokerThread, FakeClock, ScriptedListener, broker_settings

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.e2e


def chromium() -> str:
    if not Path(CHROMIUM).exists():
        installed = subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            capture_output=True,
            text=True,
        )
        if installed.returncode != 0 or not Path(CHROMIUM).exists():
            pytest.skip(f"Debian's chromium could not be installed: {installed.stderr[-500:]}")
    return CHROMIUM


@pytest.fixture
def live_broker(tmp_path):
    """A broker on the real clock, checking every half second."""
    broker = BrokerThread(broker_settings(tmp_path / "data", check_interval=0.5, transaction_timeout=1.0))
    yield broker
    broker.stop()


def test_the_dashboard_shows_pending_messages_and_live_rates(live_broker, tmp_path):
    from playwright.sync_api import sync_playwright

    stop = threading.Event()

    def dead_letter() -> None:  # a message group "billing" gave up on: in its dead-letter topic
        httpx.put(f"{live_broker.http}/consumers/billing/retry-policy", json={"max_attempts": 1}).raise_for_status()
        with Producer(broker=live_broker.address) as plain:
            plain.send(Message(topic="orders", body=b"unpaid"))
        for _ in range(2):  # delivered once, not acknowledged; the next receive moves it
            for queue_id in range(4):
                live_broker.run(live_broker.broker.messaging.receive("billing", "orders", queue_id, 1, 0.1, None))
            time.sleep(0.2)

    def traffic() -> None:
        dead_letter()
        listener = ScriptedListener("COMMIT")
        with RocketMQTransactionProducer(group="shop", broker=live_broker.address, listener=listener) as producer:
            n = 0
            while not stop.is_set():
                producer.send_message_in_transaction(Message(topic="orders", body=b"x", keys=[f"k{n}"]))
                n += 1
                stop.wait(0.05)
        with Producer(broker=live_broker.address) as plain:  # waits an hour: the dashboard shows it
            plain.send(Message(topic="orders", body=b"later", delay=3600))
        with RocketMQTransactionProducer(
            group="gone", broker=live_broker.address, listener=ScriptedListener("UNKNOWN")
        ) as p:
            for i in range(3):  # these stay pending: their producer group goes offline
                p.send_message_in_transaction(Message(topic="orders", body=b"pending", keys=[f"p{i}"]))
        with (
            KafkaTransactionProducer(transactional_id="etl-done", broker=live_broker.address) as done,
            done.transaction(),
        ):
            done.send(Message(topic="orders", body=b"kafka-model"))
        with KafkaTransactionProducer(transactional_id="etl-open", broker=live_broker.address) as left_open:
            left_open.begin_transaction()  # left open: the broker aborts it after a minute
            for _ in range(2):
                left_open.send(Message(topic="orders", body=b"kafka-model"))

    sender = threading.Thread(target=traffic)
    sender.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium(),
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                      "--no-first-run", "--disable-sync", "--disable-quic"],
            )  # fmt: skip
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(live_broker.http)
            page.wait_for_function(
                "() => Number(document.getElementById('chart-committed').dataset.points || 0) >= 2"
                " && Number(document.getElementById('chart-committed').dataset.last || 0) > 0",
                timeout=30_000,
            )
            first_total = int(page.inner_text("#committed"))
            kafka_member = KafkaConsumer("orders", bootstrap_servers=f"127.0.0.1:{live_broker.broker.kafka_port}",
                                         group_id="kafka-billing")  # fmt: skip
            kafka_member.partitions_for_topic("orders")  # before the first join: docs/kafka-clients.md, kafka-python
            while not kafka_member.assignment():
                kafka_member.poll(timeout_ms=200)
            page.wait_for_selector("tr.kafka-group-row", timeout=30_000)
            assert page.inner_text("#kafka-group-rows").split()[:2] == ["kafka-billing", "Stable"]
            assert "orders/0 orders/1 orders/2 orders/3" in page.inner_text("#kafka-group-rows")
            page.wait_for_function(  # the transactional producer's session and the Kafka member
                "() => ['grpc shop producer', 'kafka kafka-billing consumer'].every((row) =>"
                " [...document.querySelectorAll('tr.client-row')].some((tr) =>"
                " [...tr.cells].slice(0, 3).map((td) => td.textContent).join(' ') === row))",
                timeout=30_000,
            )
            kafka_member.close()
            stop.set()
            sender.join(30)
            page.wait_for_selector("tr.pending-row", timeout=30_000)
            page.wait_for_function("() => document.querySelectorAll('tr.pending-row').length === 3", timeout=30_000)
            assert "orphaned" in page.inner_text("#pending-rows")
            page.wait_for_function("() => document.querySelectorAll('tr.kafka-row').length === 2", timeout=30_000)
            kafka = page.inner_text("#kafka-rows")
            assert "etl-open" in kafka and "OPEN" in kafka and "COMMITTED" in kafka
            assert int(page.inner_text("#committed")) >= first_total > 0
            assert page.inner_text("#health") == "ok"
            assert "orders" in page.inner_text("#topic-rows")
            # Issue 11: the store's size on disk, and each topic's retention beside its queues' offsets.
            assert page.inner_text("#store-bytes").split()[-1] in ("KB", "MB")
            assert "in use" in page.get_attribute("#store-bytes", "title")
            assert "broker's" in page.inner_text("#topic-rows")
            page.wait_for_function("() => document.getElementById('topic-rows').textContent.includes('1, next in')")
            page.wait_for_selector("tr.retry-row", timeout=30_000)
            assert page.inner_text("#retry-rows").split() == ["billing", "0", "1"]
            screenshot = tmp_path / "dashboard.png"
            page.screenshot(path=str(screenshot), full_page=True)
            browser.close()
        assert screenshot.stat().st_size > 10_000
        if os.environ.get("HALFMQ_TEST_OUTPUT"):
            shutil.copy(screenshot, Path(os.environ["HALFMQ_TEST_OUTPUT"]) / "dashboard.png")
        print(f"dashboard screenshot: {screenshot}")
    finally:
        stop.set()
        sender.join(30)


BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--disable-sync", "--disable-quic"]  # fmt: skip


def test_with_a_token_the_dashboard_asks_for_it_once_and_keeps_it(tmp_path):
    from playwright.sync_api import sync_playwright

    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret"))
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
            page = browser.new_page()
            page.goto(broker.http)
            page.wait_for_selector("#token-form", state="visible", timeout=30_000)
            assert page.inner_text("#health") == "token needed"
            page.fill("#token", "wrong")
            page.click("#token-form button")
            page.wait_for_function("() => document.getElementById('updated').textContent === 'the token was refused'")
            page.fill("#token", "s3cret")
            page.click("#token-form button")
            page.wait_for_function("() => document.getElementById('topic-rows').textContent.includes('orders')")
            page.wait_for_function("() => document.getElementById('updated').textContent.startsWith('updated')")
            page.wait_for_timeout(2500)  # a later refresh still has the token: no second prompt
            assert page.is_hidden("#token-form") and page.inner_text("#health") == "ok"
            browser.close()
    finally:
        broker.stop()


def test_the_api_docs_page_works_offline(tmp_path):
    from playwright.sync_api import sync_playwright

    broker = BrokerThread(broker_settings(tmp_path / "data"))
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
            page = browser.new_page()
            elsewhere = []
            page.route(
                lambda url: not url.startswith(broker.http),
                lambda route: (elsewhere.append(route.request.url), route.abort()),
            )
            page.goto(f"{broker.http}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            assert page.locator(".opblock").count() >= 15 and "halfmq admin API" in page.inner_text("body")
            assert elsewhere == []
            browser.close()
    finally:
        broker.stop()


def test_the_message_browser_finds_a_message_by_topic_key_and_id_and_shows_its_trace(tmp_path):
    from playwright.sync_api import sync_playwright

    clock = FakeClock()
    broker = BrokerThread(broker_settings(tmp_path / "data"), clock)
    try:
        httpx.put(f"{broker.http}/consumers/workers/retry-policy", json={"max_attempts": 1}).raise_for_status()
        with Producer(broker=broker.address) as producer:
            # o-7 first: should both share a queue, the group's one delivery is o-7's.
            sent = producer.send(Message(topic="orders", body=b"order o-7", keys=("o-7",), tags="created"))
            producer.send(Message(topic="orders", body=b"another"))
        with PullConsumer(group="audit", broker=broker.address) as audit:
            audit.commit_offset("orders", queue_id=sent.queue_id, offset=sent.queue_offset + 1)
        messaging = broker.broker.messaging
        broker.run(messaging.receive("workers", "orders", sent.queue_id, 1, 30, None))
        clock.advance(31)  # not acknowledged, and the group allows one delivery: a dead letter
        broker.run(messaging.receive("workers", "orders", sent.queue_id, 1, 30, None))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(broker.http)
            page.wait_for_selector("#message-topic option:text('orders')", state="attached")
            page.select_option("#message-topic", "orders")
            page.click("#message-form button")
            page.wait_for_function("() => document.querySelectorAll('tr.message-row').length === 2")
            assert page.inner_text("#message-rows").index("another") < page.inner_text("#message-rows").index(
                "order o-7"
            ), "newest first"
            page.select_option("#message-topic", "")
            for query, found in (("o-7", ["%DLQ%workers", "orders"]), (sent.message_id, ["orders"])):
                page.fill("#message-query", query)  # by key: the message and its dead letter, which keeps its keys
                page.click("#message-form button")
                page.wait_for_function(
                    f"() => document.getElementById('message-status').textContent === '{len(found)} found'"
                    f" && document.querySelectorAll('tr.message-row').length === {len(found)}"
                )
                rows = [page.inner_text(f"tr.message-row >> nth={i}").split() for i in range(len(found))]
                assert sorted(row[1] for row in rows) == found and all(row[0] == "STORED" for row in rows)
                assert "created" in rows[-1] and ("o-7" in rows[-1])
            page.click(f"tr.message-row[data-id='{sent.message_id}']")
            page.wait_for_selector("tr.trace-row")
            assert page.inner_text("#trace-id") == sent.message_id
            rows = [page.inner_text(f"tr.trace-row >> nth={i}").split() for i in range(2)]
            assert rows == [["audit", "ACKNOWLEDGED", "0"], ["workers", "DEAD_LETTERED", "1", "%DLQ%workers/0"]]
            browser.close()
    finally:
        broker.stop()
