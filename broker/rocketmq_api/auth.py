"""The broker's shared token on the RocketMQ 5 front end, as RocketMQ's own request signature.

RocketMQ 5 clients sign each call with their credentials (``Credentials(ak, sk)``):
``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>``,
the signature being HMAC-SHA1 of the ``x-mq-date-time`` header keyed by ``sk`` (RocketMQ's ACL
compares the same digest, base64 of the hex). With an auth token, halfmq accepts a call only if
it is signed with ``sk`` = the token (any access key) over a date within DATE_WINDOW of now. The
date alone is signed, so without the window a captured signature would be a permanent credential.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

from broker.grpc_api.auth import AuthInterceptor

DATE_WINDOW = timedelta(minutes=15)
DATE_FORMAT = "%Y%m%dT%H%M%SZ"


def recent(date: str, now: datetime) -> bool:
    """True if ``date`` (``x-mq-date-time``) is within DATE_WINDOW of ``now`` (aware). The official
    clients write their local time followed by "Z" (Python's ``datetime.now()``, Java's
    ``LocalDateTime.now()``), so a date near the broker's UTC time or near its local time counts."""
    try:
        signed = datetime.strptime(date, DATE_FORMAT)
    except ValueError:
        return False
    clocks = (now.astimezone(UTC), now.astimezone())
    return any(abs(signed - clock.replace(tzinfo=None)) <= DATE_WINDOW for clock in clocks)


def signed_with(token: str, metadata: dict[str, str], now: datetime) -> bool:
    """True if the call's metadata carries a valid signature made with ``token`` as secret key,
    over a date within DATE_WINDOW of ``now``."""
    authorization = metadata.get("authorization", "")
    scheme, _, fields = authorization.partition(" ")
    parts = dict(part.strip().partition("=")[::2] for part in fields.split(","))
    if scheme != "MQv2-HMAC-SHA1" or parts.get("SignedHeaders") != "x-mq-date-time":
        return False
    date = metadata.get("x-mq-date-time", "")
    expected = hmac.new(token.encode(), date.encode(), hashlib.sha1).hexdigest()
    return hmac.compare_digest(parts.get("Signature", "").lower(), expected) and recent(date, now)


def signature_interceptor(token: str) -> AuthInterceptor:
    """Calls must be signed with ``token`` over a recent date. Dates are checked against the real
    clock, whatever clock the broker's checks run on."""
    return AuthInterceptor(
        lambda metadata: signed_with(token, metadata, datetime.now(UTC)),
        "the call must be signed with the broker's token, over an x-mq-date-time within"
        f" {DATE_WINDOW.seconds // 60} minutes of now",
    )
