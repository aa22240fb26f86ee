"""The principal of a TLS client: its certificate's subject DN, mapped by
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``).

Two steps, each as Kafka does it so that ACLs written for a Kafka cluster name the same
principals here:

- ``subject_dn(der)``: the subject of a DER certificate in RFC 2253 form, exactly as Java's
  ``X500Principal.getName()`` writes it (what Kafka's principal builder maps): RDNs most
  specific first (``CN=client,OU=eng,O=strom``), the keywords CN, C, L, ST, O, OU, STREET,
  DC and UID and every other attribute as its dotted OID with ``#`` and the hex of its DER
  value, ``,=+<>#;"\\`` escaped with a backslash, as are leading and trailing spaces. The
  certificate is read with a small DER walk, so no X.509 library is needed at run time.
- ``SslPrincipalMapper(rules).name(dn)``: a comma-separated list of ``DEFAULT`` (the DN as it
  is) and ``RULE:pattern/replacement/[LU]`` (the first rule whose pattern matches the whole
  DN replaces it, ``$n`` naming a group, then lower- or upper-cases it). The rule splitter
  and parser are Kafka's regular expressions, so a rule Kafka accepts or refuses is accepted
  or refused here; ``/`` and ``\\`` inside a pattern or replacement are escaped with ``\\``.
  A replacement is Java's syntax (``$n`` a group, ``\\x`` a literal x); a ``$n`` beyond the
  pattern's groups is literal text, as Kafka's ``escapeLiteralBackReferences`` makes it.
  No rule matching is an error (``NoMatchingRule``): the connection is refused, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NamedTuple

DEFAULT_RULES: Final = "DEFAULT"
ANONYMOUS: Final = "User:ANONYMOUS"

_RULE_PATTERN: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER: Final = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER: Final = re.compile(_RULE_PATTERN)


class InvalidRule(ValueError):
    """``ssl.principal.mapping.rules`` cannot be parsed; the message names the rule."""


class NoMatchingRule(ValueError):
    """No rule maps this DN; Kafka refuses the connection."""


@dataclass(frozen=True, slots=True)
class Rule:
    """``DEFAULT`` when ``pattern`` is None, else ``RULE:pattern/replacement/[LU]``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:  # Java's Matcher.matches()
            return None
        groups = self.pattern.groups
        # Java's String.replaceAll: every match in the DN is replaced, not only the whole.
        result = self.pattern.sub(lambda match: _java_replacement(self.replacement, match, groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:  # Kafka's Rule.toString, so splitting is checked the way Kafka checks it
        if self.pattern is None:
            return "DEFAULT"
        suffix = {"L": "/L", "U": "/U"}.get(self.case, "")
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


class SslPrincipalMapper:
    def __init__(self, rules: str = DEFAULT_RULES) -> None:
        parsed = (_parse(text) for text in _split(rules))
        self.rules: tuple[Rule, ...] = tuple(rule for rule in parsed if rule is not None)

    def name(self, dn: str) -> str:
        """The principal name of ``dn`` (the user part of ``User:<name>``)."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {dn}")

    def principal(self, dn: str) -> str:
        return f"User:{self.name(dn)}"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(str(rule) for rule in self.rules)}])"


def _split(rules: str) -> list[str]:
    return [match.group(1) for match in _RULE_SPLITTER.finditer(rules.strip())]


def _parse(text: str) -> Rule | None:
    match = _RULE_PARSER.match(text)
    if match is None or match.end() != len(text):
        unmatched = text if match is None else text[match.end():]
        raise InvalidRule(f"invalid rule {text!r} in ssl.principal.mapping.rules (unmatched: {unmatched!r})")
    if match.group(1) is not None:
        return Rule()
    if match.group(2) is None:  # an empty rule (between two commas): Kafka ignores it
        return None
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise InvalidRule(f"invalid rule {text!r} in ssl.principal.mapping.rules: {exc}") from None
    return Rule(pattern, match.group(4), match.group(6))


def _java_replacement(template: str, match: re.Match[str], groups: int) -> str:
    """``template`` read as a Java replacement string: ``\\x`` is x, ``$n`` group n (the
    longest number not beyond the pattern's groups); a group beyond them is literal text."""
    out: list[str] = []
    position = 0
    while position < len(template):
        char = template[position]
        if char == "\\" and position + 1 < len(template):
            out.append(template[position + 1])
            position += 2
            continue
        if char == "$" and position + 1 < len(template) and template[position + 1].isdigit():
            number = int(template[position + 1])
            end = position + 2
            if number > groups:  # Kafka escapes it: "$4" with three groups stays "$4"
                out.append(template[position:end])
                position = end
                continue
            while end < len(template) and template[end].isdigit() and number * 10 + int(template[end]) <= groups:
                number = number * 10 + int(template[end])
                end += 1
            out.append(match.group(number) or "")
            position = end
            continue
        out.append(char)
        position += 1
    return "".join(out)


# --- The subject DN of a certificate, as Java's X500Principal.getName() writes it ---

_KEYWORDS: Final = {  # RFC 2253's keywords, the only ones Java writes in this form
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java writes as text, and how their bytes decode.
_STRING_TAGS: Final = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1B: "latin-1",
                       0x1E: "utf-16-be"}
_ESCAPED: Final = frozenset(',=+<>#;"\\')


class CertificateError(ValueError):
    """The certificate's DER could not be read."""


def subject_dn(der: bytes) -> str:
    """The subject DN of the DER certificate ``der`` in RFC 2253 form (``X500Principal.getName()``)."""
    try:
        certificate = _children(der, _tlv(der, 0))
        tbs = _children(der, certificate[0])
        index = 1 if tbs[0].tag == 0xA0 else 0  # [0] EXPLICIT version, absent in v1
        subject = tbs[index + 4]  # serial, signature, issuer, validity, subject
        rdns = []
        for rdn in _children(der, subject):  # each a SET OF AttributeTypeAndValue
            avas = []
            for ava in _children(der, rdn):
                oid, value = _children(der, ava)[:2]
                if oid.tag != 0x06:
                    raise CertificateError("an attribute type is not an OID")
                avas.append(_ava(_oid(der[oid.start:oid.end]), der, value))
            rdns.append("+".join(avas))
    except (IndexError, ValueError) as exc:
        raise CertificateError(f"cannot read the certificate's subject: {exc}") from None
    return ",".join(reversed(rdns))


def _ava(oid: str, der: bytes, value: _Element) -> str:
    keyword = _KEYWORDS.get(oid)
    encoding = _STRING_TAGS.get(value.tag)
    if keyword is None or encoding is None:
        return f"{keyword or oid}=#{der[value.header:value.end].hex()}"
    text = der[value.start:value.end].decode(encoding)
    escaped = "".join("\\00" if char == "\0" else ("\\" + char if char in _ESCAPED else char) for char in text)
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped.rstrip(" \r"))
    if lead == len(escaped):
        trail = lead
    escaped = "".join("\\" + char if i < lead or i >= trail else char for i, char in enumerate(escaped))
    return f"{keyword}={escaped}"


class _Element(NamedTuple):
    tag: int
    header: int  # where the element starts (its tag byte)
    start: int  # where its value starts
    end: int


def _tlv(der: bytes, position: int) -> _Element:
    """The DER element at ``position``."""
    tag = der[position]
    length = der[position + 1]
    start = position + 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4:
            raise CertificateError("unsupported DER length")
        length = int.from_bytes(der[start:start + count], "big")
        start += count
    end = start + length
    if end > len(der):
        raise CertificateError("DER element runs past the end")
    return _Element(tag, position, start, end)


def _children(der: bytes, parent: _Element) -> list[_Element]:
    children = []
    position = parent.start
    while position < parent.end:
        child = _tlv(der, position)
        children.append(child)
        position = child.end
    return children


def _oid(body: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in (first, arcs[0] - 40 * first, *arcs[1:]))
