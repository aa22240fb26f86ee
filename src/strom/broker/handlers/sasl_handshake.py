"""SaslHandshake (17) reaching the broker: on a SASL listener the connection's authenticator
(strom.security.sasl) answers it, so here it came through a listener without SASL or after a
completed authentication, and Kafka's KafkaApis answers ``ILLEGAL_SASL_STATE`` (34)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from strom.protocol.messages.sasl_handshake_response import SaslHandshakeResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = SaslHandshakeRequest
VERSIONS = range(0, 2)


async def handle(broker: Broker, request: Request) -> Message:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=())
