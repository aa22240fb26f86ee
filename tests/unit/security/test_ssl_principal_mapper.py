"""``ssl.principal.mapping.rules`` and the subject DN, held to Kafka's and Java's answers.

The rule cases are those of Kafka's own SslPrincipalMapperTest (valid and invalid rules,
the mapping, how a rule list splits, escapes); the DN cases are what Java's
``X500Principal.getName()`` writes for the same certificate (RFC 2253: most specific RDN
first, RFC 2253 keywords, other attributes as OID=#hex, special characters escaped).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from strom.security.ssl_principal_mapper import (
    CertificateError,
    InvalidRule,
    NoMatchingRule,
    SslPrincipalMapper,
    subject_dn,
)
from tests.support.certs import make_certificates


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules: str) -> None:
    assert SslPrincipalMapper(rules).rules


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=(.*/$1/",  # a pattern Python's re cannot compile: one line, not a traceback
])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(InvalidRule) as caught:
        SslPrincipalMapper(rules)
    assert "\n" not in str(caught.value)


MAPPER_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_the_first_matching_rule_names_the_principal(dn: str, name: str) -> None:
    mapper = SslPrincipalMapper(MAPPER_RULES)
    assert mapper.name(dn) == name
    assert mapper.principal(dn) == f"User:{name}"


@pytest.mark.parametrize(("expected", "rules"), [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),  # empty rules are ignored
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),  # escape sequences
    (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
    (r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_split_as_kafka_splits_them(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_an_escaped_comma_inside_a_value() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


@pytest.mark.parametrize(("replacement", "name"), [
    ("$1@$2", "duke@sme"),
    ("$1@$3", "duke@$3"),  # a group the pattern does not have is literal text (Kafka's escaping)
    ("$12", "duke2"),  # the longest group number that exists: $1 then "2"
    (r"\$1", "$1"),  # Java's escape
    ("$0", "CN=duke,OU=sme"),
])
def test_replacement_is_read_as_java_reads_it(replacement: str, name: str) -> None:
    assert SslPrincipalMapper(f"RULE:^CN=(.*?),OU=(.*?)$/{replacement}/").name("CN=duke,OU=sme") == name


def test_no_matching_rule_is_an_error() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers$/$1/").name("CN=duke,OU=other")


def _certificate(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .sign(key, hashes.SHA256()))
    return certificate.public_bytes(serialization.Encoding.DER)


def _name(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])


@pytest.mark.parametrize(("subject", "dn"), [
    (_name((NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "strom"),
           (NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), (NameOID.COMMON_NAME, "client")),
     "CN=client,OU=eng,O=strom,C=US"),
    (_name((NameOID.STATE_OR_PROVINCE_NAME, "MD"), (NameOID.LOCALITY_NAME, "Fulton"),
           (NameOID.STREET_ADDRESS, "1 Main St"), (NameOID.DOMAIN_COMPONENT, "com"), (NameOID.USER_ID, "u1")),
     "UID=u1,DC=com,STREET=1 Main St,L=Fulton,ST=MD"),
    # RFC 2253's specials escaped, and spaces at either end; inner spaces kept
    (_name((NameOID.ORGANIZATION_NAME, 'Sun, Inc; "x" <y> a+b=c\\d'), (NameOID.COMMON_NAME, " #lead trail ")),
     r"CN=\ \#lead trail\ ,O=Sun\, Inc\; \"x\" \<y\> a\+b\=c\\d"),
    # not an RFC 2253 keyword: the dotted OID and the hex of the DER value (an IA5String here)
    (_name((NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "mail")),
     "CN=mail,1.2.840.113549.1.9.1=#16056140622e63"),
    (_name((NameOID.COMMON_NAME, "Zoë")), "CN=Zoë"),  # UTF8String
    (x509.Name([x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "a"),
                                                 x509.NameAttribute(NameOID.USER_ID, "u1")]),
                x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")])]),
     "DC=com,CN=a+UID=u1"),  # a multi-valued RDN
])
def test_subject_dn_is_javas_rfc2253_form(subject: x509.Name, dn: str) -> None:
    assert subject_dn(_certificate(subject)) == dn


def test_subject_dn_of_the_test_certificates(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    for identity in (certs.client, certs.service, certs.expired, certs.foreign, certs.broker):
        pem = identity.cert.read_bytes()
        der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
        assert subject_dn(der) == identity.subject
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,RULE:^CN=([^,]*),OU=eng,O=strom$/$1/,DEFAULT")
    assert [mapper.principal(identity.subject) for identity in (certs.service, certs.client, certs.foreign)] == [
        "User:service-one", "User:client", "User:CN=foreign,OU=eng,O=elsewhere"]


@pytest.mark.parametrize("der", [b"", b"\x30\x03\x02\x01", b"\x30\x84\xff\xff\xff\xff", b"not a certificate"])
def test_a_broken_certificate_is_an_error_not_a_crash(der: bytes) -> None:
    with pytest.raises(CertificateError):
        subject_dn(der)
