"""SaslAuthenticate (36) reaching the broker: on a SASL listener the connection's authenticator
(strom.security.sasl) answers it, so here it came through a listener without SASL, and Kafka's
KafkaApis answers ``ILLEGAL_SASL_STATE`` (34) with its message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from strom.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = SaslAuthenticateRequest
VERSIONS = range(0, 3)


async def handle(broker: Broker, request: Request) -> Message:
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful authentication")
