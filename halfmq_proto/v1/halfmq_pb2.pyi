from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Resolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOLUTION_UNSPECIFIED: _ClassVar[Resolution]
    COMMIT: _ClassVar[Resolution]
    ROLLBACK: _ClassVar[Resolution]
    UNKNOWN: _ClassVar[Resolution]

class Source(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_UNSPECIFIED: _ClassVar[Source]
    CLIENT: _ClassVar[Source]
    CHECK: _ClassVar[Source]

class TransactionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATE_UNSPECIFIED: _ClassVar[TransactionState]
    PENDING: _ClassVar[TransactionState]
    COMMITTED: _ClassVar[TransactionState]
    ROLLED_BACK: _ClassVar[TransactionState]
    DISCARDED: _ClassVar[TransactionState]
RESOLUTION_UNSPECIFIED: Resolution
COMMIT: Resolution
ROLLBACK: Resolution
UNKNOWN: Resolution
SOURCE_UNSPECIFIED: Source
CLIENT: Source
CHECK: Source
STATE_UNSPECIFIED: TransactionState
PENDING: TransactionState
COMMITTED: TransactionState
ROLLED_BACK: TransactionState
DISCARDED: TransactionState

class Message(_message.Message):
    __slots__ = ("topic", "body", "keys", "tags", "properties", "message_id", "born_timestamp", "deliver_at")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    body: bytes
    keys: _containers.RepeatedScalarFieldContainer[str]
    tags: str
    properties: _containers.ScalarMap[str, str]
    message_id: str
    born_timestamp: int
    deliver_at: int
    def __init__(self, topic: _Optional[str] = ..., body: _Optional[bytes] = ..., keys: _Optional[_Iterable[str]] = ..., tags: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., message_id: _Optional[str] = ..., born_timestamp: _Optional[int] = ..., deliver_at: _Optional[int] = ...) -> None: ...

class StoredMessage(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset", "message_id", "transaction_id", "keys", "tags", "properties", "body", "born_timestamp", "store_timestamp")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    message_id: str
    transaction_id: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    tags: str
    properties: _containers.ScalarMap[str, str]
    body: bytes
    born_timestamp: int
    store_timestamp: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., message_id: _Optional[str] = ..., transaction_id: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., tags: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ..., born_timestamp: _Optional[int] = ..., store_timestamp: _Optional[int] = ...) -> None: ...

class SendResult(_message.Message):
    __slots__ = ("message_id", "topic", "queue_id", "queue_offset", "recall_handle")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECALL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    topic: str
    queue_id: int
    queue_offset: int
    recall_handle: str
    def __init__(self, message_id: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., recall_handle: _Optional[str] = ...) -> None: ...

class RecallMessageRequest(_message.Message):
    __slots__ = ("topic", "recall_handle")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECALL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    recall_handle: str
    def __init__(self, topic: _Optional[str] = ..., recall_handle: _Optional[str] = ...) -> None: ...

class RecallMessageResponse(_message.Message):
    __slots__ = ("message_id",)
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    def __init__(self, message_id: _Optional[str] = ...) -> None: ...

class SendBatchRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class SendBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SendResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SendResult, _Mapping]]] = ...) -> None: ...

class SendHalfMessageRequest(_message.Message):
    __slots__ = ("message", "producer_group")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    message: Message
    producer_group: str
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ..., producer_group: _Optional[str] = ...) -> None: ...

class SendHalfMessageResponse(_message.Message):
    __slots__ = ("transaction_id", "message_id", "half_offset")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    HALF_OFFSET_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    message_id: str
    half_offset: int
    def __init__(self, transaction_id: _Optional[str] = ..., message_id: _Optional[str] = ..., half_offset: _Optional[int] = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("transaction_id", "producer_group", "resolution", "source")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    producer_group: str
    resolution: Resolution
    source: Source
    def __init__(self, transaction_id: _Optional[str] = ..., producer_group: _Optional[str] = ..., resolution: _Optional[_Union[Resolution, str]] = ..., source: _Optional[_Union[Source, str]] = ...) -> None: ...

class EndTransactionResponse(_message.Message):
    __slots__ = ("state", "already_resolved")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    state: TransactionState
    already_resolved: bool
    def __init__(self, state: _Optional[_Union[TransactionState, str]] = ..., already_resolved: _Optional[bool] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class SendMessagesRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class SendMessagesResponse(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[SendMessageOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[SendMessageOutcome, _Mapping]]] = ...) -> None: ...

class SendMessageOutcome(_message.Message):
    __slots__ = ("result", "error")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    result: SendResult
    error: ItemError
    def __init__(self, result: _Optional[_Union[SendResult, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class SendHalfMessagesRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SendHalfMessageRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[SendHalfMessageRequest, _Mapping]]] = ...) -> None: ...

class SendHalfMessagesResponse(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[SendHalfMessageOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[SendHalfMessageOutcome, _Mapping]]] = ...) -> None: ...

class SendHalfMessageOutcome(_message.Message):
    __slots__ = ("result", "error")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    result: SendHalfMessageResponse
    error: ItemError
    def __init__(self, result: _Optional[_Union[SendHalfMessageResponse, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class EndTransactionsRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[EndTransactionRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[EndTransactionRequest, _Mapping]]] = ...) -> None: ...

class EndTransactionsResponse(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[EndTransactionOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[EndTransactionOutcome, _Mapping]]] = ...) -> None: ...

class EndTransactionOutcome(_message.Message):
    __slots__ = ("result", "error")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    result: EndTransactionResponse
    error: ItemError
    def __init__(self, result: _Optional[_Union[EndTransactionResponse, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class TransactUp(_message.Message):
    __slots__ = ("call_id", "halves", "ends")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    HALVES_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    halves: SendHalfMessagesRequest
    ends: EndTransactionsRequest
    def __init__(self, call_id: _Optional[int] = ..., halves: _Optional[_Union[SendHalfMessagesRequest, _Mapping]] = ..., ends: _Optional[_Union[EndTransactionsRequest, _Mapping]] = ...) -> None: ...

class TransactDown(_message.Message):
    __slots__ = ("call_id", "halves", "ends", "error")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    HALVES_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    halves: SendHalfMessagesResponse
    ends: EndTransactionsResponse
    error: ItemError
    def __init__(self, call_id: _Optional[int] = ..., halves: _Optional[_Union[SendHalfMessagesResponse, _Mapping]] = ..., ends: _Optional[_Union[EndTransactionsResponse, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class PrepareColumnsRequest(_message.Message):
    __slots__ = ("producer_group", "batch_id", "topic", "messages")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    batch_id: int
    topic: str
    messages: MessageColumns
    def __init__(self, producer_group: _Optional[str] = ..., batch_id: _Optional[int] = ..., topic: _Optional[str] = ..., messages: _Optional[_Union[MessageColumns, _Mapping]] = ...) -> None: ...

class PrepareColumnsResponse(_message.Message):
    __slots__ = ("range_id", "queue_id", "first_offset", "end_offset", "already_stored")
    RANGE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ALREADY_STORED_FIELD_NUMBER: _ClassVar[int]
    range_id: int
    queue_id: int
    first_offset: int
    end_offset: int
    already_stored: int
    def __init__(self, range_id: _Optional[int] = ..., queue_id: _Optional[int] = ..., first_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., already_stored: _Optional[int] = ...) -> None: ...

class EndBatchRequest(_message.Message):
    __slots__ = ("producer_group", "batch_id", "resolution", "range_ids")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    RANGE_IDS_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    batch_id: int
    resolution: Resolution
    range_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, producer_group: _Optional[str] = ..., batch_id: _Optional[int] = ..., resolution: _Optional[_Union[Resolution, str]] = ..., range_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class EndBatchResponse(_message.Message):
    __slots__ = ("already_committed", "committed", "rolled_back")
    ALREADY_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    ROLLED_BACK_FIELD_NUMBER: _ClassVar[int]
    already_committed: bool
    committed: int
    rolled_back: int
    def __init__(self, already_committed: _Optional[bool] = ..., committed: _Optional[int] = ..., rolled_back: _Optional[int] = ...) -> None: ...

class SessionUp(_message.Message):
    __slots__ = ("hello", "answer")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    answer: CheckAnswer
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., answer: _Optional[_Union[CheckAnswer, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("producer_group", "client_id")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    client_id: str
    def __init__(self, producer_group: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class CheckAnswer(_message.Message):
    __slots__ = ("transaction_id", "resolution")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    resolution: Resolution
    def __init__(self, transaction_id: _Optional[str] = ..., resolution: _Optional[_Union[Resolution, str]] = ...) -> None: ...

class SessionDown(_message.Message):
    __slots__ = ("welcome", "check")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    check: CheckRequest
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., check: _Optional[_Union[CheckRequest, _Mapping]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("transaction_id", "message", "producer_group", "check_times")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CHECK_TIMES_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    message: StoredMessage
    producer_group: str
    check_times: int
    def __init__(self, transaction_id: _Optional[str] = ..., message: _Optional[_Union[StoredMessage, _Mapping]] = ..., producer_group: _Optional[str] = ..., check_times: _Optional[int] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "offset", "max_messages")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    max_messages: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., max_messages: _Optional[int] = ...) -> None: ...

class ReadColumnsRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "offset", "end", "max_messages")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    end: int
    max_messages: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., end: _Optional[int] = ..., max_messages: _Optional[int] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("messages", "next_offset", "min_offset", "max_offset")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    next_offset: int
    min_offset: int
    max_offset: int
    def __init__(self, messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., next_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ...) -> None: ...

class InitTransactionsRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_seconds")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_seconds: float
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_seconds: _Optional[float] = ...) -> None: ...

class InitTransactionsResponse(_message.Message):
    __slots__ = ("epoch", "txn_number", "aborted_messages")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TXN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ABORTED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    txn_number: int
    aborted_messages: int
    def __init__(self, epoch: _Optional[int] = ..., txn_number: _Optional[int] = ..., aborted_messages: _Optional[int] = ...) -> None: ...

class TransactionRef(_message.Message):
    __slots__ = ("transactional_id", "epoch", "txn_number")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TXN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    epoch: int
    txn_number: int
    def __init__(self, transactional_id: _Optional[str] = ..., epoch: _Optional[int] = ..., txn_number: _Optional[int] = ...) -> None: ...

class SendInTransactionRequest(_message.Message):
    __slots__ = ("txn", "messages")
    TXN_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    txn: TransactionRef
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, txn: _Optional[_Union[TransactionRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class SendInTransactionResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SendResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SendResult, _Mapping]]] = ...) -> None: ...

class OffsetInTransaction(_message.Message):
    __slots__ = ("topic", "queue_id", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class SendOffsetsToTransactionRequest(_message.Message):
    __slots__ = ("txn", "consumer_group", "offsets")
    TXN_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    txn: TransactionRef
    consumer_group: str
    offsets: _containers.RepeatedCompositeFieldContainer[OffsetInTransaction]
    def __init__(self, txn: _Optional[_Union[TransactionRef, _Mapping]] = ..., consumer_group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[OffsetInTransaction, _Mapping]]] = ...) -> None: ...

class SendOffsetsToTransactionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("txn", "commit")
    TXN_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    txn: TransactionRef
    commit: bool
    def __init__(self, txn: _Optional[_Union[TransactionRef, _Mapping]] = ..., commit: _Optional[bool] = ...) -> None: ...

class EndTxnResponse(_message.Message):
    __slots__ = ("already_ended", "messages", "offsets")
    ALREADY_ENDED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    already_ended: bool
    messages: int
    offsets: int
    def __init__(self, already_ended: _Optional[bool] = ..., messages: _Optional[int] = ..., offsets: _Optional[int] = ...) -> None: ...

class PackedColumn(_message.Message):
    __slots__ = ("offsets", "data")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    offsets: bytes
    data: bytes
    def __init__(self, offsets: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...

class PullColumnsResponse(_message.Message):
    __slots__ = ("count", "queue_offsets", "message_ids", "transaction_ids", "keys", "tags", "properties", "bodies", "born_timestamps", "store_timestamps", "next_offset", "min_offset", "max_offset")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_IDS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODIES_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    count: int
    queue_offsets: bytes
    message_ids: PackedColumn
    transaction_ids: PackedColumn
    keys: PackedColumn
    tags: PackedColumn
    properties: PackedColumn
    bodies: PackedColumn
    born_timestamps: bytes
    store_timestamps: bytes
    next_offset: int
    min_offset: int
    max_offset: int
    def __init__(self, count: _Optional[int] = ..., queue_offsets: _Optional[bytes] = ..., message_ids: _Optional[_Union[PackedColumn, _Mapping]] = ..., transaction_ids: _Optional[_Union[PackedColumn, _Mapping]] = ..., keys: _Optional[_Union[PackedColumn, _Mapping]] = ..., tags: _Optional[_Union[PackedColumn, _Mapping]] = ..., properties: _Optional[_Union[PackedColumn, _Mapping]] = ..., bodies: _Optional[_Union[PackedColumn, _Mapping]] = ..., born_timestamps: _Optional[bytes] = ..., store_timestamps: _Optional[bytes] = ..., next_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ...) -> None: ...

class MessageColumns(_message.Message):
    __slots__ = ("count", "message_ids", "keys", "tags", "properties", "bodies", "born_timestamps")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODIES_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    count: int
    message_ids: PackedColumn
    keys: PackedColumn
    tags: PackedColumn
    properties: PackedColumn
    bodies: PackedColumn
    born_timestamps: bytes
    def __init__(self, count: _Optional[int] = ..., message_ids: _Optional[_Union[PackedColumn, _Mapping]] = ..., keys: _Optional[_Union[PackedColumn, _Mapping]] = ..., tags: _Optional[_Union[PackedColumn, _Mapping]] = ..., properties: _Optional[_Union[PackedColumn, _Mapping]] = ..., bodies: _Optional[_Union[PackedColumn, _Mapping]] = ..., born_timestamps: _Optional[bytes] = ...) -> None: ...

class ItemRefusal(_message.Message):
    __slots__ = ("index", "error")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    index: int
    error: ItemError
    def __init__(self, index: _Optional[int] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class SendColumnsRequest(_message.Message):
    __slots__ = ("topic", "messages")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    messages: MessageColumns
    def __init__(self, topic: _Optional[str] = ..., messages: _Optional[_Union[MessageColumns, _Mapping]] = ...) -> None: ...

class SendColumnsResponse(_message.Message):
    __slots__ = ("queue_ids", "queue_offsets", "refused")
    QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    queue_ids: bytes
    queue_offsets: bytes
    refused: _containers.RepeatedCompositeFieldContainer[ItemRefusal]
    def __init__(self, queue_ids: _Optional[bytes] = ..., queue_offsets: _Optional[bytes] = ..., refused: _Optional[_Iterable[_Union[ItemRefusal, _Mapping]]] = ...) -> None: ...

class QueueOffsets(_message.Message):
    __slots__ = ("queue_id", "min_offset", "max_offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_offset: int
    max_offset: int
    def __init__(self, queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ...) -> None: ...

class GetQueueOffsetsRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GetQueueOffsetsResponse(_message.Message):
    __slots__ = ("queues", "pull_ports")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    PULL_PORTS_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueOffsets]
    pull_ports: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueOffsets, _Mapping]]] = ..., pull_ports: _Optional[_Iterable[int]] = ...) -> None: ...

class CommitConsumerOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "offset")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    offset: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class CommitConsumerOffsetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetConsumerOffsetsRequest(_message.Message):
    __slots__ = ("consumer_group", "topic")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class GetConsumerOffsetsResponse(_message.Message):
    __slots__ = ("offsets",)
    class OffsetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.ScalarMap[int, int]
    def __init__(self, offsets: _Optional[_Mapping[int, int]] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ("name", "queues", "retention_seconds", "message_type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    RETENTION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    queues: int
    retention_seconds: float
    message_type: str
    def __init__(self, name: _Optional[str] = ..., queues: _Optional[int] = ..., retention_seconds: _Optional[float] = ..., message_type: _Optional[str] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("topic", "created")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    created: bool
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ...) -> None: ...
