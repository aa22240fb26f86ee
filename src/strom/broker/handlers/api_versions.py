"""ApiVersions (18): the versions of every API this broker serves, from the handler table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.protocol.message import Message
from strom.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

API_KEY = 18
VERSIONS = range(0, 5)


def supported_versions() -> tuple[ApiVersion, ...]:
    from strom.broker.handlers import HANDLERS

    return tuple(
        ApiVersion(key, handler.VERSIONS.start, handler.VERSIONS.stop - 1)
        for key, handler in sorted(HANDLERS.items())
    )


async def handle(broker: Broker, request: Request) -> Message:
    return ApiVersionsResponse(error_code=0, api_keys=supported_versions())
