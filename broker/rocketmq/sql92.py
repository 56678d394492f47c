"""RocketMQ's SQL92 property filters (``MessageSelector.bySql``): the grammar and the evaluation
of RocketMQ's ``filter`` module, itself ActiveMQ's JMS selectors cut down.

An expression compares a message's properties (strings, or absent) with constants: numbers,
'strings' ('' for a quote), TRUE, FALSE and NULL. It has ``= <> > >= < <=``, ``[NOT] BETWEEN a
AND b``, ``[NOT] IN ('a', ...)``, ``IS [NOT] NULL``, ``[NOT] CONTAINS|STARTSWITH|ENDSWITH 's'``,
``AND``, ``OR``, ``NOT`` and parentheses; keywords in any case. Evaluation is three-valued as in
SQL: a comparison with an absent property is unknown, and a message passes only when the whole
expression is true. Like RocketMQ, a property compared with a number is read as that number
(integers within the constant's own width, 32 or 64 bits), two properties compared by order are
read as decimals, and a value that does not read so fails the message rather than the filter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.errors import InvalidFilter

Value = str | bool | int | float | None
Properties = Mapping[str, str]
_INT32 = 2**31
_INT64 = 2**63

_TOKEN = re.compile(
    r"""\s+|--[^\n\r]*(?:\r\n|\n|\r)|/\*.*?\*/
    |(?P<float>[0-9]+\.[0-9]*(?:e[+-]?[0-9]+)?|\.[0-9]+(?:e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+)
    |(?P<int>(?:0|[1-9][0-9]*)l?)
    |(?P<string>'(?:''|[^'])*')
    |(?P<word>[a-z_$][a-z0-9_$]*)
    |(?P<op><>|>=|<=|[=<>(),+-])""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)
_KEYWORDS = {
    "NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH",
}  # fmt: skip


class Long(int):
    """A 64-bit integer constant: one outside 32 bits (``Integer`` constants are plain ints)."""


class _Unreadable(Exception):
    """A property that does not read as the type it is compared with: the message fails."""


@dataclass(frozen=True)
class Selector:
    """A parsed expression."""

    text: str
    _evaluate: Callable[[Properties], Value]

    def matches(self, properties: Properties) -> bool:
        try:
            return self._evaluate(properties) is True
        except _Unreadable:
            return False


def parse(text: str) -> Selector:
    """Raises InvalidFilter, naming what is wrong, for an expression RocketMQ refuses."""
    parser = _Parser(_tokens(text))
    try:
        node = parser.or_expression()
    except RecursionError:
        raise InvalidFilter("the SQL92 expression is nested too deeply") from None
    if parser.peek() is not None:
        raise InvalidFilter(f"unexpected {parser.peek()!r} in SQL92 expression {text!r}")
    return Selector(text, _as_boolean(node).evaluate)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, at = [], 0
    while at < len(text):
        found = _TOKEN.match(text, at)
        if found is None:
            raise InvalidFilter(f"unexpected {text[at]!r} at {at} in SQL92 expression {text!r}")
        at = found.end()
        kind = found.lastgroup
        if kind is None:
            continue  # white space or a comment
        image = found.group(kind)
        if kind == "word" and image.upper() in _KEYWORDS:
            kind, image = "keyword", image.upper()
        tokens.append((kind, image))
    return tokens


@dataclass(frozen=True)
class _Node:
    evaluate: Callable[[Properties], Value]
    kind: str  # "constant", "property", "boolean" (comparisons, logic, TRUE/FALSE), "value"
    constant: Value = None


def _constant(value: Value) -> _Node:
    return _Node(lambda _: value, "boolean" if isinstance(value, bool) else "constant", value)


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self._tokens = tokens
        self._at = 0

    def peek(self, ahead: int = 0) -> str | None:
        at = self._at + ahead
        return self._tokens[at][1] if at < len(self._tokens) else None

    def _take(self, *images: str) -> bool:
        if self.peek() in images and self._tokens[self._at][0] in ("keyword", "op"):
            self._at += 1
            return True
        return False

    def _expect(self, image: str) -> None:
        if not self._take(image):
            raise InvalidFilter(f"expected {image!r}, found {self.peek() or 'the end'!r}")

    def _next_is_not(self, *images: str) -> bool:
        """``NOT`` followed by one of ``images`` (``NOT IN``, ``NOT BETWEEN``, ...)."""
        return self.peek() == "NOT" and self.peek(1) in images

    def or_expression(self) -> _Node:
        left = self._and_expression()
        while self._take("OR"):
            left = _logic(True, _as_boolean(left), _as_boolean(self._and_expression()))
        return left

    def _and_expression(self) -> _Node:
        left = self._equality()
        while self._take("AND"):
            left = _logic(False, _as_boolean(left), _as_boolean(self._equality()))
        return left

    def _equality(self) -> _Node:
        left = self._comparison()
        while True:
            if self._take("="):
                left = _equal(left, self._comparison())
            elif self._take("<>"):
                left = _not(_equal(left, self._comparison()))
            elif self.peek() == "IS" and self.peek(1) == "NULL":
                self._at += 2
                left = _is_null(left)
            elif self.peek() == "IS" and self.peek(1) == "NOT":
                self._at += 2
                self._expect("NULL")
                left = _not(_is_null(left))
            else:
                return left

    def _comparison(self) -> _Node:
        left = self._unary()
        while True:
            if (op := self.peek()) in _ORDERS and self._take(op):
                left = _order(op, left, self._unary())
            elif self._next_is_not("CONTAINS", "STARTSWITH", "ENDSWITH") or self.peek() in _TEXT_TESTS:
                negated = self._take("NOT")
                test = self.peek()
                self._at += 1
                left = _text_test(left, _TEXT_TESTS[str(test)], self._string(), negated)
            elif self._next_is_not("BETWEEN") or self.peek() == "BETWEEN":
                negated = self._take("NOT")
                self._expect("BETWEEN")
                low = self._unary()
                self._expect("AND")
                left = _between(left, low, self._unary(), negated)
            elif self._next_is_not("IN") or self.peek() == "IN":
                negated = self._take("NOT")
                self._expect("IN")
                self._expect("(")
                members = [self._string()]
                while self._take(","):
                    members.append(self._string())
                self._expect(")")
                left = _in(left, frozenset(members), negated)
            else:
                return left

    def _unary(self) -> _Node:
        if self._take("+"):
            return self._unary()
        if self._take("-"):
            return _negate(self._unary())
        if self._take("NOT"):
            return _not(_as_boolean(self._unary()))
        return self._primary()

    def _primary(self) -> _Node:
        if self._at >= len(self._tokens):
            raise InvalidFilter("the SQL92 expression ends too soon")
        kind, image = self._tokens[self._at]
        if self._take("("):
            node = self.or_expression()
            self._expect(")")
            return node
        literals: dict[str, Value] = {"TRUE": True, "FALSE": False, "NULL": None}
        if kind == "keyword" and image in literals:
            self._at += 1
            return _constant(literals[image])
        if kind == "string":
            return _constant(self._string())
        self._at += 1
        if kind == "int":
            value = int(image.rstrip("lL"))
            if value >= _INT64:
                raise InvalidFilter(f"{image} is out of a long's range")
            return _constant(value if value < _INT32 else Long(value))
        if kind == "float":
            number = float(image)
            if math.isinf(number):
                raise InvalidFilter(f"{image} is out of a double's range")
            return _constant(number)
        if kind == "word":
            return _Node(lambda properties: properties.get(image), "property")
        raise InvalidFilter(f"unexpected {image!r} in the SQL92 expression")

    def _string(self) -> str:
        kind, image = self._tokens[self._at] if self._at < len(self._tokens) else ("end", "")
        if kind != "string":
            raise InvalidFilter(f"expected a 'string', found {image or 'the end'!r}")
        self._at += 1
        return image[1:-1].replace("''", "'")


def _as_boolean(node: _Node) -> _Node:
    """An operand of AND, OR or NOT: a property is true only as a boolean, which properties
    (strings) never are; a number or string constant is refused."""
    if node.kind == "boolean":
        return node
    if node.kind == "property":
        return _Node(lambda p: None if (v := node.evaluate(p)) is None else v is True, "boolean")
    raise InvalidFilter(f"{node.constant if node.kind == 'constant' else 'a negated value'!r} is not a condition")


def _logic(decisive: bool, left: _Node, right: _Node) -> _Node:
    """OR (``decisive`` True) or AND (False), three-valued: a side with the decisive value
    decides; otherwise the result is unknown if a side is."""

    def evaluate(properties: Properties) -> Value:
        lv = left.evaluate(properties)
        if lv is decisive:
            return decisive
        rv = right.evaluate(properties)
        if rv is decisive:
            return decisive
        return None if lv is None or rv is None else not decisive

    return _Node(evaluate, "boolean")


def _not(operand: _Node) -> _Node:
    return _Node(lambda p: None if (v := operand.evaluate(p)) is None else not v, "boolean")


def _is_null(operand: _Node) -> _Node:
    return _Node(lambda p: operand.evaluate(p) is None, "boolean")


def _equal(left: _Node, right: _Node) -> _Node:
    for side in (left, right):
        if side.kind == "constant" and side.constant is None:
            raise InvalidFilter("NULL cannot be compared with '=' or '<>'; use IS NULL")

    def evaluate(properties: Properties) -> Value:
        lv, rv = left.evaluate(properties), right.evaluate(properties)
        if lv is None or rv is None:
            return None if lv is None and rv is not None else lv is None
        return _compare(lv, rv) == 0

    return _Node(evaluate, "boolean")


_ORDERS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
}  # fmt: skip


def _orderable(node: _Node) -> None:
    if node.kind == "boolean" or (node.kind == "constant" and not _is_number(node.constant)):
        what = "a condition" if node.kind == "boolean" else repr(node.constant)
        raise InvalidFilter(f"{what} cannot be compared by order (>, >=, <, <=, BETWEEN)")


def _order(op: str, left: _Node, right: _Node) -> _Node:
    _orderable(left)
    _orderable(right)
    holds = _ORDERS[op]

    def evaluate(properties: Properties) -> Value:
        lv = left.evaluate(properties)
        if lv is None:
            return None
        rv = right.evaluate(properties)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):  # two properties: as decimals
            return holds(_compare(_decimal(lv), _decimal(rv)))
        return holds(_compare(lv, rv))

    return _Node(evaluate, "boolean")


def _between(value: _Node, low: _Node, high: _Node, negated: bool) -> _Node:
    if low.kind == "constant" and high.kind == "constant":
        if low.constant is None or high.constant is None:
            raise InvalidFilter("the values of BETWEEN cannot be NULL")
        if _is_number(low.constant) and _is_number(high.constant) and high.constant < low.constant:  # type: ignore[operator]
            raise InvalidFilter(f"BETWEEN {low.constant} AND {high.constant}: the first must not be greater")
    if negated:
        return _logic(True, _order("<", value, low), _order(">", value, high))
    return _logic(False, _order(">=", value, low), _order("<=", value, high))


def _in(operand: _Node, members: frozenset[str], negated: bool) -> _Node:
    if operand.kind != "property":
        raise InvalidFilter("IN needs a property on its left")

    def evaluate(properties: Properties) -> Value:
        value = operand.evaluate(properties)
        return None if not isinstance(value, str) else (value in members) != negated

    return _Node(evaluate, "boolean")


_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda value, search: search in value,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def _text_test(operand: _Node, test: Callable[[str, str], bool], search: str, negated: bool) -> _Node:
    """False, not unknown, for an absent property, in both the test and its negation."""

    def evaluate(properties: Properties) -> Value:
        value = operand.evaluate(properties)
        if not search or not isinstance(value, str):
            return False
        return test(value, search) != negated

    return _Node(evaluate, "boolean")


def _negate(operand: _Node) -> _Node:
    if operand.kind == "constant" and _is_number(operand.constant):
        number = operand.constant
        return _constant(Long(-number) if isinstance(number, Long) else -number)  # type: ignore[operator]
    return _Node(lambda p: -v if _is_number(v := operand.evaluate(p)) else None, "value")  # type: ignore[operator]


def _is_number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare(lv: Value, rv: Value) -> int:
    """Java's ``compareTo`` after RocketMQ's conversions: a string read as the other side's type."""
    if isinstance(lv, str) and not isinstance(rv, str):
        lv = _read_as(lv, rv)
    elif isinstance(rv, str) and not isinstance(lv, str):
        if isinstance(lv, bool):
            raise _Unreadable  # RocketMQ's cast of the boolean to a string fails
        rv = _read_as(rv, lv)
    elif isinstance(lv, bool) != isinstance(rv, bool):
        return -1  # a boolean and a number are never equal, nor ordered
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def _read_as(text: str, like: Value) -> Value:
    if isinstance(like, bool):
        return text.lower() == "true"
    if isinstance(like, float):
        return _decimal(text)
    bound = _INT64 if isinstance(like, Long) else _INT32
    if re.fullmatch(r"[+-]?[0-9]+", text) is None or not -bound <= int(text) < bound:
        raise _Unreadable
    return int(text)


def _decimal(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _Unreadable from None
