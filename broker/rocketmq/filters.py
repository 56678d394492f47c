"""RocketMQ's TAG filter expressions: ``*`` (or nothing) admits every message, ``a || b`` the
messages tagged ``a`` or ``b``."""

from __future__ import annotations


def tags_of(expression: str) -> frozenset[str] | None:
    """The tags ``expression`` admits; None when it admits every message."""
    text = expression.strip()
    if not text or text == "*":
        return None
    return frozenset(tag.strip() for tag in text.split("||") if tag.strip())
