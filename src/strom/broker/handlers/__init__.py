"""One module per API, each declaring the versions it serves.

A handler module has ``REQUEST`` (the generated request class: its ``API_KEY`` and
``VALID_VERSIONS`` come from Kafka's schema), ``VERSIONS`` (the versions served, which
must lie within the codec's) and ``async def handle(broker, request) -> response | None``;
every module in this package is one (found at import, so adding an API is adding a file).
``HANDLERS`` below is the one table: the broker dispatches through it and
``API_VERSIONS`` (the ApiVersions answer, built once here) comes from it, so the
versions a client is told can never drift from the ones served.
Handlers are thin: they translate a request into calls on the broker's parts and the
results (or ``StorageError``/``TopicError`` codes) into a response.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import TYPE_CHECKING, Protocol, cast

from strom.protocol.message import Message
from strom.protocol.messages.api_versions_response import ApiVersion

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request


class Handler(Protocol):
    REQUEST: type[Message]
    VERSIONS: range

    async def handle(self, broker: Broker, request: Request) -> Message | None: ...


def _discover() -> dict[int, Handler]:
    """Every module in this package is a handler; two for one API key is an error."""
    found: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        request = getattr(module, "REQUEST", None)
        versions = getattr(module, "VERSIONS", None)
        handle = getattr(module, "handle", None)
        if not (isinstance(request, type) and issubclass(request, Message) and isinstance(versions, range)
                and inspect.iscoroutinefunction(handle)):
            raise TypeError(f"{module.__name__} is not a handler (REQUEST, VERSIONS, async handle)")
        key = request.API_KEY
        if key is None:
            raise TypeError(f"{module.__name__}: {request.__name__} is not a request")
        codec = request.VALID_VERSIONS
        if not versions or versions.start < codec.start or versions.stop > codec.stop or versions.step != 1:
            raise TypeError(f"{module.__name__} serves versions {versions}, outside the codec's {codec}")
        if key in found:
            raise TypeError(f"two handlers for API key {key}")
        found[key] = cast(Handler, module)
    return found


HANDLERS: dict[int, Handler] = _discover()

API_VERSIONS: tuple[ApiVersion, ...] = tuple(
    ApiVersion(key, handler.VERSIONS.start, handler.VERSIONS.stop - 1) for key, handler in sorted(HANDLERS.items())
)
"""Every API this broker serves and its versions: what ApiVersions answers."""
