"""ApiVersions (18), and how the broker answers a request version it does not serve."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from strom.broker.connection_errors import CloseConnection
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response
from strom.protocol.messages import APIS
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse
from strom.protocol.messages.request_header import RequestHeader
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def _header_only(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """A request frame (no size prefix) in header v1, which every broker can read."""
    out = bytearray()
    RequestHeader(api_key, api_version, correlation_id, "raw-client").encode_into(1, out)
    return bytes(out)


@pytest.mark.parametrize("version", range(5))
def test_every_version_lists_the_served_apis(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(ApiVersionsRequest("strom-tests", "1"), version=version)
        assert response.error_code == ErrorCode.NONE
        served = {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}
        assert served[18] == (0, 4)
        for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 19, 20, 32):  # what every client needs
            assert key in served, f"API {key} is not advertised"
        for key, (low, high) in served.items():  # never more than the codec can read
            assert low <= high
            assert low in APIS[key].versions and high in APIS[key].versions, key

    broker.run(scenario)


def test_an_unknown_api_versions_version_is_answered_in_v0_with_unsupported_version(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        answer = await h.send_frame(_header_only(18, 99, 7) + b"\x00" * 8)  # a v99 body we cannot read
        assert answer is not None
        correlation_id, response = decode_response(answer[4:], 18, 0)
        assert correlation_id == 7
        assert isinstance(response, ApiVersionsResponse)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(api.api_key == 18 and api.max_version == 4 for api in response.api_keys)  # KIP-511: retry with these

    broker.run(scenario)


@pytest.mark.parametrize(("api_key", "version"), [(1, 3), (1, 99), (0, 42), (9999, 0)])
def test_an_unsupported_version_of_another_api_closes_the_connection(
    broker: BrokerRunner, api_key: int, version: int
) -> None:
    """Fetch v3 (in the codec, not served), versions nobody knows, an unknown API key."""

    async def scenario(h: BrokerHarness) -> None:
        with pytest.raises(CloseConnection):
            await h.send_frame(_header_only(api_key, version, 3) + bytes(64))

    broker.run(scenario)


def test_a_malformed_request_closes_the_connection(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        with pytest.raises(CloseConnection):  # Metadata v1: a topics array claiming 1000 names, and no bytes
            await h.send_frame(_header_only(3, 1, 4) + b"\x00\x00\x03\xe8")

    broker.run(scenario)


def test_every_handler_module_has_a_test_module_here() -> None:
    """A new API comes with its tests: one ``test_<handler>.py`` beside this file per handler module."""
    import strom.broker.handlers as handlers

    here = Path(__file__).parent
    missing = [info.name for info in pkgutil.iter_modules(handlers.__path__) if not (here / f"test_{info.name}.py").exists()]
    assert missing == []


def test_served_lists_every_handler_module_with_its_api_key_and_versions() -> None:
    """The table the broker answers ApiVersions from is exactly what the modules declare."""
    from strom.broker.handlers import CLUSTER_SERVED, SERVED, load_all

    declared = {key: (h.__name__.rsplit(".", 1)[1], h.VERSIONS) for key, h in load_all().items()}  # type: ignore[attr-defined]
    assert not SERVED.keys() & CLUSTER_SERVED.keys()
    assert declared == {**SERVED, **CLUSTER_SERVED}


def test_api_versions_answers_what_the_handler_modules_serve() -> None:
    """One node: every module but the controller's requests; a cluster's broker: every module
    but KRaft's own."""
    from strom.broker.handlers import (
        API_VERSIONS,
        CLUSTER_API_VERSIONS,
        CLUSTER_SERVED,
        NOT_IN_ZOOKEEPER_MODE,
        load_all,
    )

    every = [(key, h.VERSIONS.start, h.VERSIONS.stop - 1) for key, h in sorted(load_all().items())]
    assert [(api.api_key, api.min_version, api.max_version) for api in API_VERSIONS] == [
        entry for entry in every if entry[0] not in CLUSTER_SERVED]
    assert [(api.api_key, api.min_version, api.max_version) for api in CLUSTER_API_VERSIONS] == [
        entry for entry in every if entry[0] not in NOT_IN_ZOOKEEPER_MODE]


def test_a_handler_module_is_imported_on_its_apis_first_request() -> None:
    """The broker starts without its handlers; looking one up imports that one alone."""
    script = (
        "import sys\n"
        "from strom.broker.broker import Broker\n"
        "from strom.broker.handlers import HANDLERS\n"
        "before = sorted(m for m in sys.modules if m.startswith('strom.broker.handlers.'))\n"
        "handler = HANDLERS[3]\n"
        "after = sorted(m for m in sys.modules if m.startswith('strom.broker.handlers.'))\n"
        "print(before, after, handler.__name__, HANDLERS.get(9999), 9999 in HANDLERS, 3 in HANDLERS)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["[]", "['strom.broker.handlers.metadata']", "strom.broker.handlers.metadata",
                           "None", "False", "True"]


def test_a_handler_that_disagrees_with_its_table_entry_is_refused() -> None:
    from strom.broker.handlers import HandlerTable

    with pytest.raises(TypeError, match="as SERVED says"):
        HandlerTable({3: ("metadata", range(0, 5))})[3]  # Metadata serves 0-12
    with pytest.raises(TypeError, match="as SERVED says"):
        HandlerTable({1: ("metadata", range(0, 13))})[1]  # the module is Metadata's, not Fetch's
