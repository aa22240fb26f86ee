"""Request and response headers, and which header version goes with which API version.

The rules (Kafka's ``ApiMessageType.requestHeaderVersion``/``responseHeaderVersion``):
a request uses header v2 when its API version is flexible, else v1 (v0 only for
ControlledShutdown v0); a response uses header v1 when flexible, else v0 — except
ApiVersions, whose response always uses v0 so that a client that asked with a version
the broker does not know can still read the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.framing import size_prefix
from strom.protocol.message import Message, UnsupportedVersionError
from strom.protocol.messages import APIS, ApiInfo
from strom.protocol.messages.request_header import RequestHeader
from strom.protocol.messages.response_header import ResponseHeader
from strom.protocol.primitives import Buffer, Records

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

_PEEK = Struct(">hhi")


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    info = APIS.get(api_key)
    return 2 if info is not None and api_version in info.request_flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    info = APIS.get(api_key)
    return 1 if info is not None and api_version in info.response_flexible else 0


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header, its body and the API it belongs to."""

    header: RequestHeader
    body: Message
    api: ApiInfo
    trailing_bytes: int = 0

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


class UnsupportedRequestError(ProtocolError):
    """A well-framed request for an API key or version this codec does not know.

    Carries the header so a broker can still answer it (ApiVersions with
    UNSUPPORTED_VERSION, or a closed connection for other APIs, as Kafka does).
    """

    error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(
            message, api_key=header.request_api_key, api_version=header.request_api_version
        )
        self.header = header


def peek_request(frame: Buffer) -> tuple[int, int, int]:
    """API key, API version and correlation id: the first 8 bytes of every request."""
    if len(frame) < 8:
        raise ProtocolError("request shorter than its header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: Buffer) -> Request:
    """Decode a request frame (without its size prefix), header and body.

    Raises ``UnsupportedRequestError`` for an unknown API key or version (the header
    is decoded as v1, which every client can send) and ``ProtocolError`` for bytes
    that are not a valid request. Bytes after a valid body are counted, not refused.
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    api_key, api_version, _ = peek_request(view)
    info = APIS.get(api_key)
    known = info is not None and api_version in info.versions
    header_version = request_header_version(api_key, api_version) if known else 1
    header, pos = RequestHeader.decode_from(header_version, view, 0)
    if info is None or not known:
        raise UnsupportedRequestError(
            f"unsupported API key {api_key} version {api_version}", header
        )
    body, end = info.request_class().decode_from(api_version, view, pos)
    # Bytes after the body are ignored, as Kafka does: librdkafka's admin client sends
    # Metadata v12 requests with 3 extra bytes (tests/compat/FINDINGS.md).
    return Request(header, body, info, len(view) - end)


def encode_request(
    body: Message, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A whole request frame, size prefix included."""
    api_key = body.API_KEY
    if api_key is None or body.KIND != "request":
        raise TypeError(f"{type(body).__name__} is not a request")
    if api_version not in body.VALID_VERSIONS:
        raise UnsupportedVersionError(
            f"version {api_version} is not valid", api_key=api_key, api_version=api_version
        )
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    out = bytearray(4)
    header.encode_into(request_header_version(api_key, api_version), out)
    return b"".join(_with_size_prefix(body.encode_into(api_version, out)))  # type: ignore[arg-type]


def encode_response(body: Message, api_version: int, correlation_id: int) -> list[Records]:
    """A whole response frame as buffers for ``sendmsg``: record sets are not copied,
    and file regions stay regions for ``sendfile``."""
    api_key = body.API_KEY
    if api_key is None or body.KIND != "response":
        raise TypeError(f"{type(body).__name__} is not a response")
    out = bytearray(4)
    ResponseHeader(correlation_id).encode_into(response_header_version(api_key, api_version), out)
    return _with_size_prefix(body.encode_into(api_version, out))


def _with_size_prefix(chunks: list[Records]) -> list[Records]:
    """Fill in the 4 bytes reserved at the start of the first chunk with the frame size."""
    size = sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in chunks) - 4
    first = chunks[0]
    if isinstance(first, bytearray):
        first[:4] = size_prefix(size)
    else:  # the header was flushed (as bytes) ahead of a large record set
        assert isinstance(first, bytes)
        chunks[0] = size_prefix(size) + first[4:]
    return chunks


def decode_response(frame: Buffer, api_key: int, api_version: int) -> tuple[int, Message]:
    """Correlation id and body of a response frame (without its size prefix)."""
    info = APIS.get(api_key)
    if info is None:
        raise ProtocolError(f"unknown API key {api_key}")
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    header, pos = ResponseHeader.decode_from(response_header_version(api_key, api_version), view, 0)
    body_class = info.response_class()
    body, end = body_class.decode_from(api_version, view, pos)
    if end != len(view):
        raise ProtocolError(
            f"{len(view) - end} unexpected bytes after the response",
            api_key=api_key,
            api_version=api_version,
            message_name=body_class.NAME,
        )
    return header.correlation_id, body
