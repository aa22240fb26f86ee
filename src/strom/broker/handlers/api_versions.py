"""ApiVersions (18): the versions of every API this broker serves.

The table is built once from the handler registry (``handlers.API_VERSIONS``) and held
by the broker, so this module imports nothing of the broker at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.protocol.message import Message
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = ApiVersionsRequest
VERSIONS = range(0, 5)


async def handle(broker: Broker, request: Request) -> Message:
    return ApiVersionsResponse(error_code=0, api_keys=broker.api_versions)
