"""Redaction at ingest: rules per project, built-ins, globs, and secrets that never reach the SQLite store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from ingest_helpers import make_span, resource_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.errors import BadInputError
from evalsi.ingest import ExportHandler, Redactor
from evalsi.records import from_value
from evalsi.stores.traces import SqliteTraceStore

EMAIL = "ana.souza@example.com"
CARD = "4111 1111 1111 1111"
CPF = "529.982.247-25"
KEY = "sk-ABCDEFGHIJKLMNOPQRSTUVWX"
SECRETS = (EMAIL, CARD, CPF, "52998224725", "ana.souza", "4111")

RULES = {
    "shop": [
        "email",
        {"builtin": "credit_card", "replacement": "[CARD]"},
        {"builtin": "cpf"},
        {"pattern": r"sk-[A-Za-z0-9]{20,}", "replacement": "[KEY]", "attributes": ["gen_ai.*", "llm.*"]},
    ],
    "*": [{"pattern": r"internal-token-\d+", "name": "token"}],
}


def _request(project: str = "shop") -> ExportTraceServiceRequest:
    messages = json.dumps([{"role": "user", "parts": [{"type": "text",
                                                      "content": f"I am {EMAIL}, card {CARD}, CPF {CPF}"}]}])
    # A JSON escape (\u0040 is "@") must not hide an address from the rules.
    output = '[{"role": "assistant", "parts": [{"type": "text", "content": "Mailed ana.souza\\u0040example.com"}]}]'
    root = make_span({"gen_ai.operation.name": "invoke_agent", "user.email": EMAIL, "gen_ai.request.key": KEY,
                      "nested": {"deep": [f"cpf {CPF}", 3]}}, name="agent", span_id=1, error=f"failed for {EMAIL}")
    chat = make_span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                      "gen_ai.input.messages": messages, "gen_ai.output.messages": output,
                      "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 3,
                      "other.key": KEY, "note": "internal-token-42"},
                     name="chat", span_id=2, parent=1, start=1_100, end=1_900,
                     events=[("exception", {"exception.message": f"card {CARD} declined"})])
    return ExportTraceServiceRequest(resource_spans=[
        resource_spans([root, chat], {"service.name": "svc", "evalsi.project": project, "owner": EMAIL}),
    ])


def _raw_db_text(path: Path) -> str:
    """Every byte of the database files, and every row, as text."""
    conn = sqlite3.connect(path)
    rows = [repr(row) for table in ("spans", "traces") for row in conn.execute(f"SELECT * FROM {table}")]
    conn.close()
    raw = b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))
    return "\n".join(rows) + raw.decode("latin-1")


async def test_secrets_never_reach_the_store(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    store = await SqliteTraceStore.open(db)
    handler = ExportHandler(store, redactor=Redactor.from_mapping(RULES, "rules"))
    await handler.export(_request())
    record = await store.get_trace("shop", "0af7651916cd43dd8448eb211c80319c")
    await store.close()
    text = _raw_db_text(db)
    for secret in SECRETS:
        assert secret not in text, secret
    assert "internal-token-42" not in text  # the "*" rule applies to every project
    assert "[REDACTED]" in text and "[CARD]" in text and "[KEY]" in text
    assert record is not None
    chat = next(s for s in record.trajectory.steps if s.name == "chat")
    assert chat.input.messages.messages[0].content == "I am [REDACTED], card [CARD], CPF [REDACTED]"
    assert chat.output.messages.messages[0].content == "Mailed [REDACTED]"
    assert chat.model == "gpt-4o-mini" and chat.usage.input_tokens == 10  # structure untouched
    root = next(s for s in record.trajectory.steps if s.name == "agent")
    assert root.error == "failed for [REDACTED]"
    # A rule with attribute globs touches only the attributes they match.
    assert root.attributes["gen_ai.request.key"].string_value == "[KEY]"
    assert chat.attributes["other.key"].string_value == KEY
    assert root.attributes["nested"].struct_value["deep"][0] == "cpf [REDACTED]"


async def test_glob_rules_leave_other_attributes_alone(tmp_path: Path) -> None:
    store = await SqliteTraceStore.open(tmp_path / "t.db")
    rules = {"shop": [{"pattern": r"sk-[A-Za-z0-9]{20,}", "attributes": ["gen_ai.*"]}]}
    handler = ExportHandler(store, redactor=Redactor.from_mapping(rules, "rules"))
    await handler.export(_request())
    record = await store.get_trace("shop", "0af7651916cd43dd8448eb211c80319c")
    await store.close()
    assert record is not None
    chat = next(s for s in record.trajectory.steps if s.name == "chat")
    root = next(s for s in record.trajectory.steps if s.name == "agent")
    assert root.attributes["gen_ai.request.key"].string_value == "[REDACTED]"
    assert chat.attributes["other.key"].string_value == KEY
    assert root.attributes["user.email"].string_value == EMAIL


async def test_other_projects_are_untouched(tmp_path: Path) -> None:
    store = await SqliteTraceStore.open(tmp_path / "t.db")
    handler = ExportHandler(store, redactor=Redactor.from_mapping({"shop": ["email"]}, "rules"))
    await handler.export(_request("blog"))
    record = await store.get_trace("blog", "0af7651916cd43dd8448eb211c80319c")
    await store.close()
    assert record is not None
    root = next(s for s in record.trajectory.steps if s.name == "agent")
    assert root.attributes["user.email"].string_value == EMAIL


def test_builtins_check_what_they_match() -> None:
    redactor = Redactor.from_mapping({"p": ["email", "credit_card", "cpf"]}, "rules")
    (email, card, cpf) = redactor.for_project("p")
    assert email.apply(f"write to {EMAIL}.") == "write to [REDACTED]."
    assert card.apply(f"{CARD} and 4111-1111-1111-1111") == "[REDACTED] and [REDACTED]"
    assert card.apply("order 1234 5678 9012 3456") == "order 1234 5678 9012 3456"  # fails the Luhn check
    assert cpf.apply(f"{CPF} / 52998224725 / 529.982.247-26") == "[REDACTED] / [REDACTED] / 529.982.247-26"


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"shop": [{"pattern": "(unclosed"}]}, r"shop\[0\]: pattern '\(unclosed' is not a valid regex"),
        ({"shop": ["email", "passport"]}, r"shop\[1\]: builtin 'passport' is unknown"),
        ({"shop": [{"pattern": "x", "builtin": "email"}]}, "exactly one of pattern"),
        ({"shop": [{"pattern": "x", "colour": "red"}]}, "colour: unknown key"),
        ({"shop": [{"pattern": "x*"}]}, "matches the empty string"),
        ({"shop": [{"pattern": "x", "replacement": r"\1"}]}, "replacement"),
        ({"shop": [{"pattern": "x", "attributes": [3]}]}, "attributes"),
        ({"shop": "email"}, "expected a list of rules"),
        ({"a b": ["email"]}, "project"),
        (["email"], "expected a mapping"),
    ],
)
def test_bad_rules_are_refused_naming_the_rule(rules: object, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        Redactor.from_mapping(rules, "rules.yaml")


def test_ingest_refuses_a_bad_rules_file_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalsi_ingest.main import main

    bad = tmp_path / "redact.yaml"
    bad.write_text("shop:\n  - email\n  - pattern: '[a-'\n")
    assert main(["--redact", str(bad), "--http-port", "0", "--grpc-port", "0"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "shop[1]" in err and "not a valid regex" in err
    assert main(["--redact", str(tmp_path / "missing.yaml")]) == 2
    good = tmp_path / "redact.json"
    good.write_text(json.dumps(RULES))
    from evalsi_ingest.main import settings_from_args

    settings = settings_from_args(["--redact", str(good)])
    settings.validate()
    redactor = settings.redactor()
    assert redactor is not None and len(redactor.for_project("shop")) == 5


def test_the_email_fast_path_on_json_equals_value_by_value_redaction() -> None:
    # Without escapes, the e-mail rule rewrites a JSON text in place; the document must equal what redacting it
    # value by value gives, and stay valid JSON (numbers, literals and structure untouched).
    import json as json_module

    from evalsi.ingest.redaction import _apply_json, _redact_text, _RuleSet, parse_rule

    rules = _RuleSet([parse_rule("email", "test")])
    assert rules.json_inert
    documents = [
        '[{"role":"user","content":"mail ana.b+x@mail.example.com, cc bo@ex.co.uk"}]',
        '{"to":"user9@example.com","n":1.5e+3,"ok":true,"none":null,"list":["a@b.io",12,"-1@x"]}',
        '{"nested":{"deep":[{"v":"x@y.zz and again x@y.zz"}]},"plain":"no address here"}',
    ]
    for text in documents:
        fast = _redact_text(rules, text)
        assert json_module.loads(fast) == _apply_json(rules.rules, json_module.loads(text))
        assert "@" not in fast.replace("-1@x", "")  # "-1@x" has no domain: not an address, kept as it is
    escaped = '{"to":"ana\\u0040example.com"}'  # an escape sends the text through the JSON path
    assert json_module.loads(_redact_text(rules, escaped)) == {"to": "[REDACTED]"}
    quoted = _RuleSet([parse_rule({"builtin": "email", "replacement": '"x"'}, "test")])
    assert not quoted.json_inert  # a replacement with a quote could break the JSON: no fast path


def test_a_duplicate_json_key_does_not_hide_a_value_from_redaction() -> None:
    # json.loads keeps the last of two equal keys; redaction must see (and rewrite) both values, escaped or not.
    import json as json_module

    from evalsi.ingest.redaction import _redact_text, _RuleSet, parse_rule

    cards = _RuleSet([parse_rule("credit_card", "test")])
    text = '{"card":"4111 1111 1111 1111","card":"none","n":[1,{"x":"4111-1111-1111-1111"}]}'
    redacted = _redact_text(cards, text)
    assert "4111" not in redacted and redacted.count('"card"') == 2
    pairs = json_module.loads(redacted, object_pairs_hook=list)
    assert pairs[0] == ("card", "[REDACTED]") and pairs[1] == ("card", "none")
    emails = _RuleSet([parse_rule("email", "test")])
    escaped = '{"to":"ana\\u0040example.com","to":"x"}'
    assert "example.com" not in _redact_text(emails, escaped)


def test_the_bytes_screen_passes_every_text_the_rules_might_change() -> None:
    # After mapping, a step is screened as its serialized bytes: sound only if the bytes screen passes whatever
    # the text screen passes, non-ASCII text included; rules whose screens are not ASCII-only get no bytes screen.
    from evalsi.ingest.redaction import _redact_text, _RuleSet, parse_rule

    emails = _RuleSet([parse_rule("email", "test")])
    assert emails.might_change_bytes is not None
    texts = ["ana@example.com", "olá ana@exemplo.com.br ✓", "ana\\u0040example.com", "x\\u0041", "genai@1",
             "no address", "ünï@cödé.de", "a@b.c", "", "@@@.io", "mail: ana@example.c0m", "é@ex.io"]
    for text in texts:
        if emails.might_change(text):
            assert emails.might_change_bytes(text.encode()), text
        if emails.might_change_bytes(text.encode()) is None:  # the bytes screen clears: the text rules change nothing
            assert _redact_text(emails, text) == text
    assert _RuleSet([parse_rule("email", "t"), parse_rule("credit_card", "t")]).might_change_bytes is None
    assert _RuleSet([parse_rule({"pattern": "secret-[a-z]+"}, "t")]).might_change_bytes is None



def test_every_project_rules_apply_once() -> None:
    redactor = Redactor.from_mapping({"*": ["email"], "shop": ["cpf"]}, "rules")
    assert [rule.name for rule in redactor.for_project("blog")] == ["email"]
    assert [rule.name for rule in redactor.for_project("*")] == ["email"]
    assert [rule.name for rule in redactor.for_project("shop")] == ["email", "cpf"]


def test_the_email_rule_found_from_its_screen_replaces_what_the_pattern_would() -> None:
    # Long texts are redacted by finding "@domain" and extending it left; that must be exactly pattern.sub.
    import random

    from evalsi.ingest.redaction import parse_rule

    rule = parse_rule({"builtin": "email", "replacement": "<\\g<0>>"}, "test")  # a template, expanded per match
    plain = parse_rule("email", "test")
    assert rule.screen is not None and plain.screen is not None
    pieces = ["ana", "Z9", ".", "-", "_", "%", "+", "@", "@ex-ample", "@b", ".com", ".io", ".c", " ", "é", '"', "\\"]
    generator = random.Random(7)  # about one text in eight holds an address, some two or more
    for _ in range(3000):
        text = "".join(generator.choice(pieces) for _ in range(generator.randint(0, 25)))
        for candidate in (rule, plain):
            expected = candidate.pattern.sub(candidate.replacement, text)
            assert candidate._apply_from_screen(text, candidate.screen) == expected, text
    long = "an e-mail in a long message: ana.souza@example.com.br, then a@b and x@y.io. " * 20
    assert plain.apply(long) == plain.pattern.sub(plain.replacement, long) and "souza" not in plain.apply(long)


async def test_the_stored_otlp_span_holds_only_redacted_values(tmp_path: Path) -> None:
    """The span's OTLP form is stored beside its step: a repeated key's earlier value, a link's attributes and
    the trace states (which nothing maps) must not carry a secret into it."""
    db = tmp_path / "traces.db"
    store = await SqliteTraceStore.open(db)
    span = make_span({"gen_ai.operation.name": "chat", "note": f"first {EMAIL}", "kept": 7}, name="chat")
    span.attributes.add(key="note", value=AnyValue(string_value="second, clean"))
    span.trace_state = f"vendor={CPF}"
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, trace_state=f"k={CARD}",
                   attributes=[KeyValue(key="who", value=AnyValue(string_value=EMAIL))])
    request = ExportTraceServiceRequest(resource_spans=[resource_spans([span], {"evalsi.project": "shop"})])
    await ExportHandler(store, redactor=Redactor.from_mapping(RULES, "rules")).export(request)
    record = await store.get_trace("shop", "0af7651916cd43dd8448eb211c80319c")
    await store.close()
    text = _raw_db_text(db)
    for secret in (EMAIL, CPF, CARD, "ana.souza", "52998224725"):
        assert secret not in text, secret
    assert record is not None
    (step,) = record.trajectory.steps
    # What is read is what the dict of attributes held: the last value of a repeated key, the rest as sent.
    assert from_value(step.attributes["note"]) == "second, clean"
    assert from_value(step.attributes["kept"]) == 7
    assert from_value(step.attributes["otel.links"])[0]["attributes"] == {"who": "[REDACTED]"}
    assert from_value(step.attributes["evalsi.mapper"]) == "genai@1"


def _value_by_value(redaction: object, span: Span) -> tuple[bytes, dict[str, object]]:
    """The span redacted without any screen of its bytes: events, links and status, then every decoded value."""
    from evalsi.traces.otlp import attributes_to_dict, write_back

    attrs = attributes_to_dict(span.attributes)
    redaction.rest(span)  # type: ignore[attr-defined]
    changed = redaction.attributes(attrs)  # type: ignore[attr-defined]
    if changed or len(attrs) != len(span.attributes):
        write_back(span, attrs, changed)
    return span.SerializeToString(), attrs


@pytest.mark.parametrize("rules", [["email"], ["email", {"pattern": "sk-[A-Za-z0-9]{8,}", "attributes": ["key.*"]}],
                                   ["email", "credit_card"], [{"pattern": "(?i)secret"}]])
def test_a_span_cleared_by_its_bytes_screen_is_what_value_by_value_redaction_leaves(rules: list[object]) -> None:
    """``SpanRedaction.span`` skips value-by-value redaction of a span whose bytes no rule's screen finds anything
    in: it must give the same bytes and decoded attributes as redacting every value, whatever the span holds."""
    import random

    from evalsi.traces.otlp import attributes_to_dict

    redaction = Redactor.from_mapping({"*": rules}, "rules").span_redaction("shop")
    assert redaction is not None
    pieces = ["ana", "@", "example.com", "\\u0040", ".io", " ", "sk-ABCDEFGHIJ", "Secret", "4111 1111 1111 1111",
              "é", '"', "{", "}", "[", "]", ":", ",", "bob@ex.io", "bob\\u0040ex.io"]
    generator = random.Random(11)
    cleared = 0
    for case in range(400):
        pool = generator.sample(pieces, 7)  # so that many spans lack some literal ("@", "\\u0040") altogether

        def text() -> str:
            return "".join(generator.choice(pool) for _ in range(generator.randint(0, 6)))  # noqa: B023

        attrs: dict[str, object] = {f"key.{i}": text() for i in range(generator.randint(0, 3))}
        attrs["n"] = generator.choice([7, 2**60, 1.5, float("nan"), True])
        attrs["list"] = [text(), 3]
        attrs["kv"] = {"inner": text()}
        attrs["json"] = '[{"role": "user", "content": "' + text() + '"}]'
        span = make_span(attrs, name="s", events=[("exception", {"exception.message": text()})] if case % 3 else ())
        span.attributes.add(key="raw", value=AnyValue(bytes_value=generator.randbytes(12)))
        if case % 5 == 0:  # a repeated key: the dict keeps its last value, the stored span must not keep the first
            span.attributes.add(key="n", value=AnyValue(string_value=text()))
        if case % 4 == 0:
            span.status.message = text()
        expected_bytes, expected_attrs = _value_by_value(redaction, Span.FromString(span.SerializeToString()))
        serialized = span.SerializeToString()
        decoded = attributes_to_dict(span.attributes)
        got = redaction.span(span, decoded, serialized)
        cleared += got is serialized
        assert Span.FromString(got) == Span.FromString(expected_bytes), case
        assert json.dumps(decoded, sort_keys=True) == json.dumps(expected_attrs, sort_keys=True), case
    assert cleared > 0  # some spans come back as they were sent, bytes and all
