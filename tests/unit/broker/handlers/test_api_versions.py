"""ApiVersions (18), and how the broker answers a request version it does not serve."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest

from strom.broker.broker import CloseConnection
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
