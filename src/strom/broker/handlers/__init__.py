"""One module per API, each declaring the versions it serves.

A handler module has ``API_KEY``, ``VERSIONS`` (a range within the codec's valid
versions) and ``async def handle(broker, request) -> response | None``; every module
in this package is one (found at import, so adding an API is adding a file).
``HANDLERS`` below is the one table: the broker dispatches through it and the ApiVersions response
is built from it, so the versions a client is told can never drift from the ones served.
Handlers are thin: they translate a request into calls on the broker's parts and the
results (or ``StorageError``/``TopicError`` codes) into a response.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request
    from strom.protocol.message import Message


class Handler(Protocol):
    API_KEY: int
    VERSIONS: range

    async def handle(self, broker: Broker, request: Request) -> Message | None: ...


def _discover() -> dict[int, Handler]:
    """Every module in this package is a handler; two for one API key is an error."""
    found: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        versions = getattr(module, "VERSIONS", None)
        handle = getattr(module, "handle", None)
        if not (isinstance(key, int) and isinstance(versions, range) and inspect.iscoroutinefunction(handle)):
            raise TypeError(f"{module.__name__} is not a handler (API_KEY, VERSIONS, async handle)")
        if key in found:
            raise TypeError(f"two handlers for API key {key}")
        found[key] = cast(Handler, module)
    return found


HANDLERS: dict[int, Handler] = _discover()
