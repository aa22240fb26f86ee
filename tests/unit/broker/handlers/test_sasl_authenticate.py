"""SaslAuthenticate (36) reaching the broker (a listener without SASL): ILLEGAL_SASL_STATE with
Kafka's message, in every version."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner


@pytest.mark.parametrize("version", [0, 1, 2])
def test_authenticate_on_a_plaintext_listener_is_an_illegal_sasl_state(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(SaslAuthenticateRequest(b"\0alice\0alice-secret"), version=version)
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert response.error_message == "SaslAuthenticate request received after successful authentication"

    broker.run(scenario)
