"""Receive / ack / change-invisible-duration in the store, with a fake clock (the RocketMQ 5 consumer model)."""

from __future__ import annotations

import asyncio

import pytest

from broker.delays import DelayService
from broker.errors import InvalidArgument, StaleReceiptHandle
from broker.messaging import MessagingService
from broker.model import Message
from broker.rocketmq.filters import compile_filter
from broker.store import Flush, Store
from tests.support import FakeClock


@pytest.fixture
def service(tmp_path):
    store = Store(tmp_path, flush=Flush.ASYNC)
    clock = FakeClock()
    messaging = MessagingService(
        store, DelayService(store, max_delay=3600, clock=clock), max_body_bytes=1024, clock=clock
    )
    loop = asyncio.new_event_loop()
    loop.run_until_complete(messaging.create_topic("t", 1))
    bodies = [f"m{i}".encode() for i in range(5)]
    loop.run_until_complete(
        messaging.send(
            [
                Message(topic="t", body=b, message_id=b.decode(), tags="even" if i % 2 == 0 else "odd")
                for i, b in enumerate(bodies)
            ]
        )
    )
    yield messaging, clock, loop.run_until_complete, store
    store.close()
    loop.close()


def test_received_messages_are_invisible_until_their_duration_passes(service):
    messaging, clock, run, _ = service
    first = run(messaging.receive("g", "t", 0, 2, 10, None))
    assert [d.message.body for d in first] == [b"m0", b"m1"] and {d.attempt for d in first} == {1}
    assert [d.message.body for d in run(messaging.receive("g", "t", 0, 10, 10, None))] == [b"m2", b"m3", b"m4"]
    assert run(messaging.receive("g", "t", 0, 10, 10, None)) == []
    clock.advance(11)
    again = run(messaging.receive("g", "t", 0, 1, 10, None))
    assert [(d.message.body, d.attempt) for d in again] == [(b"m0", 2)]


def test_acks_advance_the_group_offset_in_order_even_when_out_of_order(service):
    messaging, _, run, store = service
    received = run(messaging.receive("g", "t", 0, 3, 10, None))
    run(messaging.ack("g", "t", received[1].receipt_handle))
    assert store.consumer_offsets("g", "t") == {}
    run(messaging.ack("g", "t", received[0].receipt_handle))
    assert store.consumer_offsets("g", "t") == {0: 2}
    with pytest.raises(StaleReceiptHandle):
        run(messaging.ack("g", "t", received[0].receipt_handle))


def test_a_new_invisible_duration_gives_a_new_handle_and_the_old_one_goes_stale(service):
    messaging, clock, run, _ = service
    (delivery,) = run(messaging.receive("g", "t", 0, 1, 60, None))
    handle = run(messaging.change_invisible("g", "t", delivery.receipt_handle, 1))
    with pytest.raises(StaleReceiptHandle):
        run(messaging.ack("g", "t", delivery.receipt_handle))
    clock.advance(2)
    (redelivered,) = run(messaging.receive("g", "t", 0, 1, 60, None))
    assert (redelivered.message.body, redelivered.attempt) == (b"m0", 2)
    with pytest.raises(StaleReceiptHandle):
        run(messaging.ack("g", "t", handle))
    run(messaging.ack("g", "t", redelivered.receipt_handle))


def test_groups_are_independent_and_filters_skip_the_messages_they_do_not_admit(service):
    messaging, _, run, store = service
    evens = run(messaging.receive("evens", "t", 0, 10, 10, compile_filter("TAG", "even").admits))
    assert [d.message.body for d in evens] == [b"m0", b"m2", b"m4"]
    odds = run(messaging.receive("odds", "t", 0, 10, 10, compile_filter("SQL92", "TAGS <> 'even'").admits))
    assert [d.message.body for d in odds] == [b"m1", b"m3"]
    assert len(run(messaging.receive("all", "t", 0, 10, 10, None))) == 5
    for delivery in evens:
        run(messaging.ack("evens", "t", delivery.receipt_handle))
    assert store.consumer_offsets("evens", "t") == {0: 5}


@pytest.mark.parametrize("handle", ["garbage", "0.0", "0.99.1", "0.0.7"])
def test_malformed_or_unknown_handles_are_refused(service, handle):
    messaging, _, run, _ = service
    run(messaging.receive("g", "t", 0, 1, 10, None))
    with pytest.raises(StaleReceiptHandle):
        run(messaging.ack("g", "t", handle))


def test_bad_receive_arguments_are_refused(service):
    messaging, _, run, _ = service
    for args in (
        ("g", "t", 0, 0, 10, None),
        ("g", "t", 0, 1, 0, None),
        ("g", "t", 5, 1, 10, None),
        ("bad group", "t", 0, 1, 10, None),
    ):
        with pytest.raises(InvalidArgument):
            run(messaging.receive(*args))


def test_a_message_kept_invisible_at_the_front_does_not_hide_the_rest_of_the_queue(tmp_path):
    store = Store(tmp_path, flush=Flush.ASYNC)
    messaging = MessagingService(store, DelayService(store, max_delay=3600), max_body_bytes=1024, clock=FakeClock())
    loop = asyncio.new_event_loop()
    run = loop.run_until_complete
    try:
        run(messaging.create_topic("t", 1))
        for start in (0, 550):
            run(
                messaging.send(
                    [Message(topic="t", body=b"%d" % i, message_id=f"m{i}") for i in range(start, start + 550)]
                )
            )
        first = run(messaging.receive("g", "t", 0, 1024, 3600, None))
        assert len(first) == 1024
        for delivery in first[1:]:  # the first stays in flight, holding the group's offset at 0
            run(messaging.ack("g", "t", delivery.receipt_handle))
        rest = run(messaging.receive("g", "t", 0, 1024, 3600, None))
        assert [d.message.body for d in rest] == [b"%d" % i for i in range(1024, 1100)]
    finally:
        store.close()
        loop.close()
