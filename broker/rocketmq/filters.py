"""RocketMQ's consumer filters, for both RocketMQ front ends: a TAG expression (``*`` or nothing
admits every message, ``a || b`` the messages tagged ``a`` or ``b``) or an SQL92 expression over
the message's properties, its tag among them as ``TAGS`` (broker/rocketmq/sql92.py)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from broker.errors import InvalidFilter
from broker.rocketmq import sql92

TAG, SQL92 = "TAG", "SQL92"
TAGS = "TAGS"  # the message property that holds its tag, as SQL92 expressions name it


@dataclass(frozen=True)
class Filter:
    """A compiled subscription expression: which messages of a topic a consumer gets."""

    tags: frozenset[str] | None = None  # a TAG filter's tags; None: any
    selector: sql92.Selector | None = None

    def admits(self, tag: str, properties: Mapping[str, str]) -> bool:
        if self.selector is not None:
            return self.selector.matches({**properties, TAGS: tag} if tag else properties)
        return self.tags is None or tag in self.tags

    @property
    def everything(self) -> bool:
        return self.tags is None and self.selector is None


EVERYTHING = Filter()


def tags_of(expression: str) -> frozenset[str] | None:
    """The tags ``expression`` admits; None when it admits every message."""
    text = expression.strip()
    if not text or text == "*":
        return None
    return frozenset(tag.strip() for tag in text.split("||") if tag.strip())


@functools.lru_cache(maxsize=1024)  # pulls and receives carry their expression every time
def compile_filter(expression_type: str, expression: str) -> Filter:
    """Raises InvalidFilter for an SQL92 expression that does not parse, or another type. Filters
    are immutable, so one compiled expression serves every request that names it."""
    kind = (expression_type or TAG).upper()
    if kind == TAG:
        return Filter(tags=tags_of(expression))
    if kind == SQL92:
        return Filter(selector=sql92.parse(expression))
    raise InvalidFilter(f"unknown filter expression type {expression_type!r}: TAG or SQL92")
