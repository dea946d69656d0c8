"""The safety pack's detectors: checksums equal to python-stdnum's and the standard library's, each kind found in
the forms people write it and not in look-alikes, allow-lists, redaction, and the batch form deciding only where the
function would pass."""

from __future__ import annotations

import ipaddress
import random

import pytest
from stdnum import iban as stdnum_iban
from stdnum import luhn as stdnum_luhn

from evalsi.packs.safety import detectors
from evalsi.packs.safety.detectors import PII_PATTERNS, SECRET_PATTERNS, clean, find, redact

PII = tuple(PII_PATTERNS)
SECRETS = tuple(SECRET_PATTERNS)
VALID_IBANS = ["DE89370400440532013000", "GB82WEST12345698765432", "FR1420041010050500013M02606",
               "NL91ABNA0417164300", "CH9300762011623852957", "SI56263300012039086", "AT611904300234573201",
               "NO9386011117947", "MT84MALT011000012345MTLCAST001S"]


def test_luhn_equals_stdnum_on_random_digit_strings() -> None:
    rng = random.Random(5)
    numbers = ["".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24))) for _ in range(5000)]
    numbers += ["4111111111111111", "5500005555555559", "378282246310005", "6011111111111117", "0", "00"]
    assert [detectors.luhn_ok(n) for n in numbers] == [stdnum_luhn.is_valid(n) for n in numbers]
    assert sum(detectors.luhn_ok(n) for n in numbers) > 400  # both answers occur


def test_iban_mod97_equals_stdnum_on_valid_ibans_and_single_character_errors() -> None:
    cases = list(VALID_IBANS)
    rng = random.Random(3)
    for valid in VALID_IBANS:
        for _ in range(40):
            at = rng.randrange(2, len(valid))
            swapped = rng.choice([c for c in "0123456789" if c != valid[at]]) if valid[at].isdigit() else \
                rng.choice([c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c != valid[at]])
            cases.append(valid[:at] + swapped + valid[at + 1:])
    # spaced forms as printed
    cases += [" ".join(v[i:i + 4] for i in range(0, len(v), 4)) for v in VALID_IBANS]
    assert [detectors.iban_ok(c) for c in cases] == [stdnum_iban.is_valid(c) for c in cases]
    assert sum(map(detectors.iban_ok, cases)) == 2 * len(VALID_IBANS)


@pytest.mark.parametrize("text", ["192.168.0.1", "10.0.0.255", "256.1.1.1", "01.2.3.4", "0.0.0.0", "999.999.999.999"])
def test_ipv4_equals_ipaddress(text: str) -> None:
    try:
        ipaddress.IPv4Address(text)
        expected = True
    except ValueError:
        expected = False
    assert detectors.ipv4_ok(text) == expected


@pytest.mark.parametrize("text", ["::1", "2001:db8::ff00:42:8329", "fe80::1", "1:2:3:4:5:6:7:8", "12:30:45",
                                  "::ffff:192.0.2.1", "1::2::3", "abcd:ef01:2345:6789:abcd:ef01:2345:6789"])
def test_ipv6_equals_ipaddress(text: str) -> None:
    try:
        ipaddress.IPv6Address(text)
        expected = True
    except ValueError:
        expected = False
    assert detectors.ipv6_ok(text) == expected


@pytest.mark.parametrize(("text", "kind"), [
    ("write to jane.doe+news@example.co.uk today", "email"),
    ("Mail: ÉLODIE_42@mail-server.fr.", "email"),
    ("call +14155552671", "phone"),
    ("call +44 20 7946 0958 now", "phone"),
    ("call (555) 123-4567", "phone"),
    ("call 555-123-4567", "phone"),
    ("ring 020 7946 0958", "phone"),
    ("appelez le 06 12 34 56 78", "phone"),
    ("card 4111 1111 1111 1111 exp 12/29", "credit_card"),
    ("card 4111-1111-1111-1111", "credit_card"),
    ("amex 378282246310005", "credit_card"),
    ("IBAN DE89 3704 0044 0532 0130 00 AND more", "iban"),
    ("IBAN GB82WEST12345698765432", "iban"),
    ("ssn 123-45-6789", "us_ssn"),
    ("host 192.168.10.24 is up", "ipv4"),
    ("host 2001:db8::ff00:42:8329 is up", "ipv6"),
    ("loopback ::1", "ipv6"),
])
def test_each_kind_is_found_and_redacted(text: str, kind: str) -> None:
    findings = find(text, PII)
    assert [f.kind for f in findings] == [kind]
    shown = redact(text, findings)
    assert f"[{kind.upper()}]" in shown
    value = text[findings[0].start:findings[0].end]
    assert value not in shown
    assert clean([text], PII, False) == [None]  # the batch form leaves it to the function


@pytest.mark.parametrize("text", [
    "", "   ", "Version 1.2.3 shipped in 2024 at 12:30:45 to 3.14 percent of users",
    "card 4111 1111 1111 1112",  # fails Luhn
    "IBAN DE89 3704 0044 0532 0130 01",  # fails mod-97
    "ssn 000-12-3456 and 666-12-3456 and 900-12-3456",  # never issued
    "host 999.168.0.1",  # not an address
    "ratio 1:2:3",  # not IPv6
    "日本語のテキスト、メールなし。", "not an email: user@localhost or @handle",
    "order #12345 shipped", "call 12", "a budget of 100 000 000 euros", "12.345.678 inhabitants", "2024-01-15",
])
def test_look_alikes_are_not_findings(text: str) -> None:
    assert find(text, PII) == []


def test_allow_list_and_kind_selection() -> None:
    text = "Contact support@acme.com or jane@acme.com, or call +14155552671."
    assert [f.kind for f in find(text, PII)] == ["email", "email", "phone"]
    assert [f.kind for f in find(text, PII, allow=frozenset({"support@acme.com"}))] == ["email", "phone"]
    assert [f.kind for f in find(text, ("phone",))] == ["phone"]


@pytest.mark.parametrize(("text", "kind"), [
    ("key AKIAIOSFODNN7EXAMPLE in the config", "aws_access_key"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key"),
    ("token ghp_" + "a1B2" * 9, "github_token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_token"),
    ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123", "openai_key"),
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "openai_key"),
    ("xoxb-123456789012-abcdefghij", "slack_token"),
    ("stripe sk_live_0123456789abcdefABCD", "stripe_key"),
    ("AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "google_api_key"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE...", "private_key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private_key"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop", "jwt"),
])
def test_secret_kinds(text: str, kind: str) -> None:
    assert [f.kind for f in find(text, SECRETS)] == [kind]


@pytest.mark.parametrize("text", ["ask for a skeleton key", "sk-short", "the task-list", "AKIA is a prefix",
                                  "-----BEGIN PUBLIC KEY-----", "eyJ alone"])
def test_secret_look_alikes(text: str) -> None:
    assert find(text, SECRETS) == []


def test_high_entropy_is_an_option_with_a_threshold() -> None:
    text = "use Zx9Qk2LmP0aB7rT4uV1wY8cD3eF6gH5j here, not aaaaaaaaaaaaaaaaaaaaaaaa"
    assert find(text, SECRETS) == []
    found = find(text, SECRETS, entropy=4.5)
    assert [(f.kind, text[f.start:f.end]) for f in found] == [("high_entropy", "Zx9Qk2LmP0aB7rT4uV1wY8cD3eF6gH5j")]
    assert detectors.shannon_entropy("aaaa") == 0.0 and detectors.shannon_entropy("ab") == 1.0
    assert find(text, SECRETS, entropy=7.9) == []


def test_batch_form_passes_only_texts_the_function_passes() -> None:
    rng = random.Random(11)
    pieces = ["hello", "4111 1111 1111 1111", "4111 1111 1111 1112", "a@b.io", "12:30", "::1", "+14155552671",
              "AKIAIOSFODNN7EXAMPLE", "ü", "2024", "555-123-4567", "IBAN", "GB82WEST12345698765432", ""]
    texts = [" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) for _ in range(3000)]
    for kinds in (PII, SECRETS, ("email",)):
        for text, verdict in zip(texts, clean(texts, kinds, False), strict=True):
            if verdict is True:
                assert find(text, kinds) == [], text
            else:
                assert verdict is None
    assert any(v is True for v in clean(texts, PII, False))
