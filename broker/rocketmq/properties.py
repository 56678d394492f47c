"""Properties RocketMQ's broker adds to the messages it hands out, whichever protocol reads them."""

from __future__ import annotations

from broker.model import StoredMessage

TRANSACTION_ID = "__transactionId__"


def added_by_broker(message: StoredMessage) -> dict[str, str]:
    """A committed transactional message carries its transaction's id, which RocketMQ makes its
    message id (``TransactionalMessageBridge.parseHalfMessageInner``)."""
    return {TRANSACTION_ID: message.message_id} if message.transaction_id else {}
