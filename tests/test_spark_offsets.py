"""The Spark source's offset arithmetic and option checks, as pure code (no Spark, no broker)."""

from __future__ import annotations

import pytest

from spark_consumer.offsets import (
    EARLIEST,
    LATEST,
    DataLoss,
    OffsetError,
    admit,
    cap,
    check_available,
    from_json,
    parse_position,
    resolve,
    to_json,
)
from spark_consumer.options import OptionError, SourceOptions

RANGES = {"orders": {0: (0, 10), 1: (0, 0), 2: (5, 8)}}


def test_positions_parse_from_keywords_and_json():
    assert parse_position("startingOffsets", None, LATEST) == LATEST
    assert parse_position("startingOffsets", " Earliest ", LATEST) == EARLIEST
    assert parse_position("startingOffsets", '{"orders": {"0": 3, "1": -2}}', LATEST) == {"orders": {0: 3, 1: -2}}


@pytest.mark.parametrize(
    "text", ["soon", "[1, 2]", '{"orders": 3}', '{"orders": {"zero": 1}}', '{"orders": {"0": "x"}}']
)
def test_malformed_positions_are_refused_with_the_option_name(text):
    with pytest.raises(OffsetError, match="startingOffsets"):
        parse_position("startingOffsets", text, LATEST)


def test_positions_resolve_against_the_brokers_ranges():
    assert resolve("s", EARLIEST, RANGES) == {"orders": {0: 0, 1: 0, 2: 5}}
    assert resolve("s", LATEST, RANGES) == {"orders": {0: 10, 1: 0, 2: 8}}
    assert resolve("s", {"orders": {0: 4, 1: -1, 2: -2}}, RANGES) == {"orders": {0: 4, 1: 0, 2: 5}}


@pytest.mark.parametrize(
    ("position", "message"),
    [
        ({"orders": {0: 1}}, "every queue"),
        ({"orders": {0: 1, 1: 0, 2: 5}, "payments": {0: 0}}, "names topics"),
        ({"orders": {0: -7, 1: 0, 2: 5}}, "negative"),
    ],
)
def test_json_positions_must_match_the_subscription(position, message):
    with pytest.raises(OffsetError, match=message):
        resolve("startingOffsets", position, RANGES)


def test_unservable_offsets_fail_or_skip_to_the_earliest_as_asked():
    with pytest.raises(DataLoss, match="no longer stored"):
        check_available({"orders": {0: 0, 1: 0, 2: 1}}, RANGES, True)
    with pytest.raises(DataLoss, match="beyond the newest"):
        check_available({"orders": {0: 99, 1: 0, 2: 5}}, RANGES, True)
    assert check_available({"orders": {0: 99, 1: 0, 2: 1}}, RANGES, False) == {"orders": {0: 0, 1: 0, 2: 5}}


def test_admission_splits_the_limit_in_proportion_to_backlog():
    start = {"a": {0: 0, 1: 0}, "b": {0: 10}}
    latest = {"a": {0: 60, 1: 30}, "b": {0: 20}}
    end = admit(start, latest, 10)
    granted = {(t, q): end[t][q] - start[t][q] for t in end for q in end[t]}
    assert sum(granted.values()) == 10
    assert granted == {("a", 0): 6, ("a", 1): 3, ("b", 0): 1}
    assert admit(start, latest, 1000) == latest
    assert admit(start, latest, None) == latest


def test_admission_always_makes_progress_and_never_passes_latest():
    start = {"t": {q: 0 for q in range(4)}}
    latest = {"t": {0: 1, 1: 1, 2: 1, 3: 100}}
    for limit in (1, 2, 3, 50):
        end = admit(start, latest, limit)
        assert sum(end["t"].values()) == limit
        assert all(end["t"][q] <= latest["t"][q] for q in range(4))


def test_available_now_caps_at_its_target_and_offsets_round_trip_through_json():
    assert cap({"t": {0: 9, 1: 2}}, {"t": {0: 5, 1: 5}}) == {"t": {0: 5, 1: 2}}
    offsets = {"t": {1: 2, 0: 9}}
    assert to_json(offsets) == {"t": {"0": 9, "1": 2}}
    assert from_json(to_json(offsets)) == offsets


GOOD = {"broker": "127.0.0.1:10911", "topics": "orders, payments"}


def test_good_options_parse_with_kafka_like_defaults():
    streaming = SourceOptions.parse(GOOD, streaming=True)
    batch = SourceOptions.parse({**GOOD, "endingOffsets": '{"orders": {"0": 5}}'}, streaming=False)
    assert (streaming.topics, streaming.starting, streaming.fail_on_data_loss) == (("orders", "payments"), LATEST, True)
    assert (batch.starting, batch.ending) == (EARLIEST, {"orders": {0: 5}})
    assert SourceOptions.parse({**GOOD, "maxOffsetsPerTrigger": "7"}, streaming=True).max_offsets_per_trigger == 7


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"topics": "orders"}, True, "broker"),
        ({**GOOD, "broker": "localhost"}, True, "broker"),
        ({**GOOD, "topics": " , "}, True, "topics"),
        ({**GOOD, "topics": "a,a"}, True, "topics"),
        ({**GOOD, "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger"),
        ({**GOOD, "maxOffsetsPerTrigger": "lots"}, True, "maxOffsetsPerTrigger"),
        ({**GOOD, "maxOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({**GOOD, "endingOffsets": "latest"}, True, "batch queries only"),
        ({**GOOD, "endingOffsets": "earliest"}, False, "endingOffsets"),
        ({**GOOD, "startingOffsets": "latest"}, False, "reads nothing"),
        ({**GOOD, "failOnDataLoss": "maybe"}, True, "failOnDataLoss"),
        ({**GOOD, "fetchSize": "-1"}, True, "fetchSize"),
        ({**GOOD, "fetchSize": "5000"}, True, "'fetchSize' must be an integer from 1 to 1024, got 5000"),
        ({**GOOD, "startingOfsets": "earliest"}, True, "unknown option"),
    ],
)
def test_bad_options_are_refused_naming_the_option(options, streaming, message):
    with pytest.raises(OptionError, match=message):
        SourceOptions.parse(options, streaming=streaming)
