"""Kafka's ``sasl.jaas.config`` values: one JAAS login module entry on one line.

The syntax (Java's ``ConfigFile`` as Kafka's ``JaasConfig`` reads it)::

    <LoginModule class> <flag> [<option>=<value> ...];

``flag`` is ``required``, ``requisite``, ``sufficient`` or ``optional``; a value is a word or a
double-quoted string (``\\"`` and ``\\\\`` escaped inside quotes); the entry ends with ``;``.
Kafka requires exactly one entry in a ``sasl.jaas.config`` value. Examples::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

Only the options matter to a broker (``user_<name>`` for PLAIN; the unsecured validator's
options for OAUTHBEARER); the module name is checked against the mechanism's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

CONTROL_FLAGS: Final = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN: Final = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([=;])|([^\s=;"]+))', re.DOTALL)


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that cannot be read; the message is one line."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind "q" (quoted), "p" (punctuation) or "w" (word)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasConfigError(f"unterminated quoted value at character {pos}")
        quoted, punct, word = match.groups()
        if quoted is not None:
            tokens.append(("q", re.sub(r"\\(.)", r"\1", quoted)))
        elif punct is not None:
            tokens.append(("p", punct))
        else:
            tokens.append(("w", word))
        pos = match.end()
    return tokens


def parse_jaas_config(text: str) -> JaasEntry:
    """The one login module entry of a ``sasl.jaas.config`` value (``JaasConfigError``)."""
    entries = parse_jaas_entries(text)
    if len(entries) != 1:
        raise JaasConfigError(f"a sasl.jaas.config value must contain exactly one login module, not {len(entries)}")
    return entries[0]


def parse_jaas_entries(text: str) -> list[JaasEntry]:
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "w" or i + 1 >= len(tokens) or tokens[i + 1][0] != "w":
            raise JaasConfigError("expected '<LoginModule class> <control flag>' at the start of an entry")
        module, flag = tokens[i][1], tokens[i + 1][1]
        if flag.lower() not in CONTROL_FLAGS:
            raise JaasConfigError(f"invalid control flag {flag!r} for {module} "
                                  f"(one of {', '.join(sorted(CONTROL_FLAGS))})")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise JaasConfigError(f"the entry for {module} does not end with ';'")
            if tokens[i] == ("p", ";"):
                i += 1
                break
            if (i + 2 >= len(tokens) or tokens[i][0] != "w" or tokens[i + 1] != ("p", "=")
                    or tokens[i + 2][0] == "p"):
                raise JaasConfigError(f"expected option=value in the entry for {module}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        entries.append(JaasEntry(module, flag.lower(), options))
    return entries
