"""RocketMQ's ACL signature on remoting requests, as its clients sign them (``AclClientRPCHook``)
and its broker checks them (``DefaultAuthenticationContextBuilder``): the request's header fields
but ``Signature``, sorted by name, their values joined, then the body, signed with HMAC-SHA1 and
the secret key, in base64. halfmq's secret key is its auth token; any access key will do, as
for its RocketMQ 5 front end."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY, SIGNATURE = "AccessKey", "Signature"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # left out of what clients before 4.9.4 signed
_V4_9_4 = 401  # MQVersion.Version's ordinal


def signature(fields: Mapping[str, str], body: bytes, secret_key: str, *, version: int = _V4_9_4) -> str:
    signed = {k: v for k, v in fields.items() if k != SIGNATURE and (version >= _V4_9_4 or k != UNIQUE_KEY_QUERY)}
    content = "".join(signed[name] for name in sorted(signed)).encode() + body
    return base64.b64encode(hmac.new(secret_key.encode(), content, hashlib.sha1).digest()).decode()


def refusal(fields: Mapping[str, str], body: bytes, version: int, secret_key: str) -> str | None:
    """Why a request is not signed with ``secret_key``; None when it is."""
    if ACCESS_KEY not in fields or SIGNATURE not in fields:
        return "the request is not signed: give the client an AclClientRPCHook with the auth token as secret key"
    if not hmac.compare_digest(fields[SIGNATURE], signature(fields, body, secret_key, version=version)):
        return (
            f"the signature of access key {fields[ACCESS_KEY]!r} does not match: the secret key is not the auth token"
        )
    return None
