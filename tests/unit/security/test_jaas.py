"""Kafka's ``sasl.jaas.config`` syntax: one login module, a control flag, options, ';'."""

from __future__ import annotations

import pytest

from strom.security.sasl.jaas import JaasConfigError, parse_jaas_config, parse_jaas_entries


def test_kafkas_documented_plain_entry() -> None:
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n  username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "required"
    assert entry.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                             "user_alice": "alice-secret"}


def test_unquoted_values_escapes_and_punctuation_inside_quotes() -> None:
    entry = parse_jaas_config(r'M optional a=1 b="x;y=z" c="say \"hi\"" ;')
    assert entry.options == {"a": "1", "b": "x;y=z", "c": 'say "hi"'}


@pytest.mark.parametrize(("text", "message"), [
    ("M required a=1", "does not end with ';'"),
    ("M always;", "invalid control flag"),
    ('M required a="open;', "unterminated"),
    ("M required a;", "option=value"),
    ("M required; N required;", "exactly one login module"),
    ("", "exactly one login module"),
])
def test_malformed_values_are_refused_with_one_line(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)


def test_several_entries() -> None:
    assert [e.login_module for e in parse_jaas_entries("A required; B sufficient x=y;")] == ["A", "B"]


SASL_LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2"}
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.mark.parametrize(("properties", "message"), [
    ({"sasl.enabled.mechanisms": "PLAIN"}, "enables PLAIN but listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "Plain required"},
     "does not end with ';'"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.scram.ScramLoginModule required user_a="b";'},
     "PLAIN needs login module org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-1"}, "enables SASL mechanism SCRAM-SHA-1, which is not supported"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,GSSAPI"}, "GSSAPI (Kerberos"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "listener.name.sasl_plaintext.connections.max.reauth.ms": "soon"},
     "invalid value 'soon' for listener.name.sasl_plaintext.connections.max.reauth.ms"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connection.failed.authentication.delay.ms": "600000"},
     "should always be less than connections.max.idle.ms=600000"),
])
def test_a_sasl_listeners_bad_settings_are_one_config_error_line(properties: dict[str, str], message: str) -> None:
    from strom.broker.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties(SASL_LISTENERS | properties)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_per_listener_and_per_mechanism_settings() -> None:
    from strom.broker.config import BrokerConfig
    from strom.security.sasl.listener_config import listener_config

    config = BrokerConfig.from_properties(SASL_LISTENERS | {
        "sasl.enabled.mechanisms": "GSSAPI", "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "plain,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, "connections.max.reauth.ms": "60000",
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "1000"})
    settings = listener_config(config, "SASL_PLAINTEXT")
    assert settings.enabled_mechanisms == ("PLAIN", "OAUTHBEARER")
    assert settings.plain_users == {"alice": "alice-secret"}
    assert settings.max_reauth_ms == {"PLAIN": 60000, "OAUTHBEARER": 1000}
    assert (settings.failed_authentication_delay_ms, settings.max_receive_size) == (100, 524288)
