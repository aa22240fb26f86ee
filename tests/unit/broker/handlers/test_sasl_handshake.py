"""SaslHandshake (17) reaching the broker (a listener without SASL): ILLEGAL_SASL_STATE, as
Kafka's KafkaApis answers; advertised in ApiVersions so clients find SASL support."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner


@pytest.mark.parametrize("version", [0, 1])
def test_a_handshake_on_a_plaintext_listener_is_an_illegal_sasl_state(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(SaslHandshakeRequest("PLAIN"), version=version)
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert response.mechanisms == ()
        versions = await h.request(ApiVersionsRequest("strom-tests", "1"), version=3)
        advertised = {api.api_key: (api.min_version, api.max_version) for api in versions.api_keys}
        assert advertised[17] == (0, 1) and advertised[36] == (0, 2)

    broker.run(scenario)
