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
