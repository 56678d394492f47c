"""RocketMQ's remoting frame (``RemotingCommand``), both header encodings.

A frame is big-endian: its length (4 bytes, of all that follows), then 4 bytes whose high byte
is the header's encoding (0 JSON, 1 RocketMQ's binary) and whose low 3 bytes are the header's
length, the header, and the body. A response repeats its request's ``opaque`` and encoding.
The binary header (``RocketMQSerializable``) is: code (2 bytes), language (1), version (2),
opaque (4), flag (4), remark (4-byte length, UTF-8), and the ext fields (4-byte length, then
each key with a 2-byte length and each value with a 4-byte length).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum

MAX_FRAME = 16 * 1024 * 1024  # bytes after the length: RocketMQ's frameMaxLength
RESPONSE = 1  # flag bits: the command answers a request
ONEWAY = 2  # the request expects no answer
# The version answers carry: RocketMQ 5.5.0's (MQVersion.Version.V5_5_0's ordinal). Clients learn
# the broker's version from its answer to their heartbeat and refuse to pull with an SQL92 filter
# from one older than 4.1.0.
VERSION = 514
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST")
_BINARY_HEAD = struct.Struct(">hBhii")


class Encoding(IntEnum):
    JSON = 0
    ROCKETMQ = 1


class FrameError(Exception):
    """Bytes that are no remoting command: the connection closes, as RocketMQ's decoder closes it."""


@dataclass
class Command:
    """One request or response; ``fields`` are the header's ext fields (a request header's
    fields, as strings)."""

    code: int
    opaque: int = 0
    flag: int = 0
    fields: dict[str, str] = field(default_factory=dict)
    remark: str | None = None
    body: bytes = b""
    language: str = "PYTHON"
    version: int = 0
    encoding: Encoding = Encoding.JSON

    @property
    def oneway(self) -> bool:
        return bool(self.flag & ONEWAY)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE)

    def answer(self, code: int, remark: str | None = None, body: bytes = b"", **fields: object) -> Command:
        """The response to this request."""
        return Command(
            code=code,
            opaque=self.opaque,
            flag=RESPONSE,
            fields={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in fields.items() if v is not None},
            remark=remark,
            body=body,
            version=VERSION,
            encoding=self.encoding,
        )


def encode(command: Command) -> bytes:
    """The whole frame, its length first."""
    header = _binary_header(command) if command.encoding is Encoding.ROCKETMQ else _json_header(command)
    return (
        struct.pack(">ii", 4 + len(header) + len(command.body), command.encoding << 24 | len(header))
        + header
        + (command.body)
    )


def decode(frame: bytes) -> Command:
    """A command from a frame without its length. Raises FrameError."""
    if len(frame) < 4:
        raise FrameError(f"a frame of {len(frame)} bytes has no header length")
    (info,) = struct.unpack_from(">i", frame)
    kind, size = (info >> 24) & 0xFF, info & 0xFFFFFF
    if size > len(frame) - 4:
        raise FrameError(f"a header of {size} bytes in a frame of {len(frame)}")
    header, body = frame[4 : 4 + size], frame[4 + size :]
    if kind == Encoding.JSON:
        command = _from_json(header)
    elif kind == Encoding.ROCKETMQ:
        command = _from_binary(header)
    else:
        raise FrameError(f"an unknown header encoding {kind}")
    command.body = body
    return command


def _json_header(command: Command) -> bytes:
    header: dict[str, object] = {
        "code": command.code,
        "language": command.language,
        "version": command.version,
        "opaque": command.opaque,
        "flag": command.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if command.remark is not None:
        header["remark"] = command.remark
    if command.fields:
        header["extFields"] = command.fields
    return json.dumps(header, separators=(",", ":")).encode()


def _from_json(header: bytes) -> Command:
    try:
        parsed = json.loads(header)
        fields = parsed.get("extFields") or {}
        return Command(
            code=int(parsed["code"]),
            opaque=int(parsed.get("opaque", 0)),
            flag=int(parsed.get("flag", 0)),
            fields={str(k): "" if v is None else str(v) for k, v in fields.items()},
            remark=None if parsed.get("remark") is None else str(parsed["remark"]),
            language=str(parsed.get("language", "JAVA")),
            version=int(parsed.get("version", 0)),
            encoding=Encoding.JSON,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FrameError(f"a JSON header that does not parse: {exc}") from None


def _binary_header(command: Command) -> bytes:
    language = LANGUAGES.index(command.language) if command.language in LANGUAGES else LANGUAGES.index("OTHER")
    out = bytearray(_BINARY_HEAD.pack(command.code, language, command.version, command.opaque, command.flag))
    remark = (command.remark or "").encode()
    out += struct.pack(">i", len(remark)) + remark
    fields = bytearray()
    for key, value in command.fields.items():
        k, v = key.encode(), value.encode()
        fields += struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
    out += struct.pack(">i", len(fields)) + fields
    return bytes(out)


def _from_binary(header: bytes) -> Command:
    try:
        code, language, version, opaque, flag = _BINARY_HEAD.unpack_from(header)
        at = _BINARY_HEAD.size
        remark, at = _sized(header, at, ">i")
        fields_bytes, at = _sized(header, at, ">i")
        fields, i = {}, 0
        while i < len(fields_bytes):
            key, i = _sized(fields_bytes, i, ">h")
            value, i = _sized(fields_bytes, i, ">i")
            fields[key.decode()] = value.decode()
        return Command(
            code=code,
            opaque=opaque,
            flag=flag,
            fields=fields,
            remark=remark.decode() or None,
            language=LANGUAGES[language] if language < len(LANGUAGES) else "OTHER",
            version=version,
            encoding=Encoding.ROCKETMQ,
        )
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"a binary header that does not parse: {exc}") from None


def _sized(data: bytes, at: int, length: str) -> tuple[bytes, int]:
    """The bytes at ``at`` after their length (of struct format ``length``), and where they end."""
    (size,) = struct.unpack_from(length, data, at)
    at += struct.calcsize(length)
    if size < 0 or at + size > len(data):
        raise struct.error(f"a length of {size} at byte {at} runs past the header")
    return data[at : at + size], at + size
