"""RocketMQ's SQL92 filters (broker/rocketmq/sql92.py), against the rules of RocketMQ's filter
module (``SelectorParser.jj``, ``ComparisonExpression``, ``LogicExpression``,
``UnaryExpression``); the conformance suite's classic ``filter`` scenario judges a sample of
them against the real broker."""

from __future__ import annotations

import pytest

from broker.errors import InvalidFilter
from broker.rocketmq.filters import EVERYTHING, compile_filter
from broker.rocketmq.sql92 import parse

PROPERTIES = {"a": "10", "b": "abc", "big": "3000000000", "yes": "TRUE", "s": "hello world", "f": "2.5"}


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ("a > 5", True), ("a = 10", True), ("a <> 10", False), ("a >= 10.0", True), ("a = 10L", True),
        ("b = 'abc'", True), ("b <> 'x'", True), ("b = 'it''s'", False),
        # An absent property makes a comparison unknown: neither it nor its negation passes.
        ("z = 1", False), ("z <> 1", False), ("NOT (z = 1)", False), ("z IS NULL", True), ("a IS NOT NULL", True),
        # Three-valued AND and OR: unknown OR true is true, unknown AND false is false.
        ("z > 1 OR a > 5", True), ("a > 5 OR z > 1", True), ("z > 1 AND a > 5", False),
        ("NOT (z > 1 AND a < 5)", True),
        ("a BETWEEN 1 AND 10", True), ("a NOT BETWEEN 1 AND 9", True), ("a BETWEEN 11 AND 20", False),
        ("b IN ('abc', 'd')", True), ("b NOT IN ('abc')", False), ("z IN ('a')", False), ("z NOT IN ('a')", False),
        ("s CONTAINS 'lo w'", True), ("s STARTSWITH 'he' AND s ENDSWITH 'ld'", True), ("s NOT ENDSWITH 'x'", True),
        # The text tests are false, not unknown, for an absent property: so are their negations.
        ("z CONTAINS 'x'", False), ("z NOT CONTAINS 'x'", False),
        # A property compared with a number is read as one of the constant's width; one that does not
        # read so fails the message: "2.5" is no integer, "3000000000" no 32-bit one.
        ("f > 2", False), ("f > 2.0", True), ("f < 3", False), ("big > 5", False), ("big > 2147483648", True),
        ("b > 5", False), ("b = 5", False),
        # Two properties compared by order are read as decimals.
        ("a > f", True), ("b > f", False),
        ("yes = TRUE", True), ("b = TRUE", False), ("b = FALSE", True),
        # A bare property is a condition only as a boolean, which a string never is.
        ("a", False), ("NOT a", True),
        ("-a < 0", False), ("a > -5", True), ("+a > 5", True),
        ("A = 10", False),  # property names are case-sensitive; keywords are not
        ("a = 10 and B is null", True), ("a = 10 -- a comment\n", True), ("/* a comment */ a = 10", True),
        ("a = 1 = FALSE", True),
    ],
)  # fmt: skip
def test_an_expression_passes_the_messages_rocketmq_passes(expression, matches):
    assert parse(expression).matches(PROPERTIES) is matches


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("a > 'x'", "'x' cannot be compared by order"),
        ("a BETWEEN 'a' AND 'b'", "'a' cannot be compared by order"),
        ("NOT z > 1", "a condition cannot be compared by order"),  # NOT binds tighter than >
        ("a > TRUE", "a condition cannot be compared by order"),
        ("a = NULL", "NULL cannot be compared with '=' or '<>'; use IS NULL"),
        ("5", "5 is not a condition"),
        ("a AND 'x'", "'x' is not a condition"),
        ("a BETWEEN 5 AND 1", "BETWEEN 5 AND 1: the first must not be greater"),
        ("a IN (1)", "expected a 'string', found '1'"),
        ("'x' IN ('a')", "IN needs a property on its left"),
        ("a >", "the SQL92 expression ends too soon"),
        ("", "the SQL92 expression ends too soon"),
        ("(a > 1", "expected ')', found 'the end'"),
        ("a != 1", "unexpected '!' at 2"),
        ("a.b = 1", "unexpected '.' at 1"),
        ("a = 'open", 'unexpected "\'" at 4'),
        ("a = 1 b = 2", "unexpected 'b'"),
        ("a > 9223372036854775808", "9223372036854775808 is out of a long's range"),
        ("(" * 5000 + "a > 1" + ")" * 5000, "nested too deeply"),
    ],
)
def test_an_expression_rocketmq_refuses_is_refused_with_its_reason(expression, reason):
    with pytest.raises(InvalidFilter, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse(expression)


def test_a_filter_sees_the_tag_as_the_property_tags_and_tag_expressions_as_before():
    sql = compile_filter("SQL92", "TAGS IN ('a', 'b') AND n > 1")
    assert [sql.admits(tag, {"n": n}) for tag, n in [("a", "2"), ("c", "2"), ("b", "1"), ("", "2")]] == [
        True, False, False, False,
    ]  # fmt: skip
    tags = compile_filter("TAG", "a || b")
    assert [tags.admits(tag, {}) for tag in ("a", "b", "c")] == [True, True, False]
    assert compile_filter("", "*") == compile_filter("TAG", "") == EVERYTHING
    with pytest.raises(InvalidFilter, match="unknown filter expression type 'CLASS'"):
        compile_filter("CLASS", "x")
