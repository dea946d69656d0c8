"""Redaction at ingest: per-project regex rules applied to spans before anything is stored or published.

A rules file (YAML or JSON) maps a project (or ``"*"``, every project) to a list of rules::

    shop:
      - email                                   # a built-in rule by name: email, credit_card, cpf
      - {builtin: cpf, replacement: "[CPF]"}
      - {pattern: "sk-[A-Za-z0-9]{20,}", replacement: "[KEY]", attributes: ["gen_ai.*", "llm.*"]}
    "*":
      - credit_card

A rule without ``attributes`` applies to every string value: span, event, link and resource attribute values
(inside arrays and kvlists too), the span's status message, and, after mapping, the step's content, tool call
and attributes (so content a mapper decoded from JSON is covered as well). A rule with ``attributes`` (globs
over attribute keys, ``fnmatch`` style) applies only to the values of matching attributes, before mapping, so
content mapped from them is redacted too. Invalid files and regexes are refused at start, naming the rule.

Before mapping, span and resource attributes are redacted as the mapper decodes them (``SpanRedaction``: plain
strings are cheaper to screen than protobuf values; the mapper writes what changed back into the OTLP span,
which is stored beside the step), and each span's events, links and status message in the span itself; the
mapper reads nothing else.

Most strings hold nothing to redact, so each rule first screens a text cheaply (``RedactionRule.might_change``)
and only a text that passes is parsed as JSON and rewritten. A project's rules screen a text together first
(``_RuleSet``, built once per project: one literal test or one combined regex, not one call per rule).
The screen is sound: it passes every text in which the rule would change something, including after one level of
JSON decoding (which is all ``_redact_text`` does), and every text that contains such a text, so one screen of a
whole serialized ``Step`` can clear all its strings.
"""

from __future__ import annotations

import fnmatch
import json
import re
import re._parser as sre_parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.errors import BadInputError
from evalsi.projects import check_project
from evalsi.traces.model import MappedSpan
from evalsi.traces.otlp import write_back

from .redaction_builtins import BUILTINS

DEFAULT_REPLACEMENT = "[REDACTED]"
ALL_PROJECTS = "*"
_RULE_KEYS = ("pattern", "builtin", "replacement", "attributes", "name")
# Step fields that identify rather than carry content; redacting them would break the trace's shape.
_STEP_IDENTITY = frozenset({"id", "parent_id", "span_id", "name", "model"})


# JSON escapes other than \uXXXX decode to quotes, slashes and control characters, which no built-in matches; a
# pattern of the user's might, so for those any backslash sends the text through the full path.
_BUILTIN_ESCAPE = "\\u"
_ANY_ESCAPE = "\\"
# Below this many characters the pattern's own scan costs less than finding the screen and extending it.
_SHORT_TEXT = 256
_KEY_MEMO = 4096  # attribute keys remembered per glob rule; enough for any real schema, bounded for any input


def _only_inside(source: str) -> bool:
    """Whether a pattern looks at nothing outside its match (no anchors, word boundaries or lookarounds): then a
    match in a text is a match in any text containing it, so the pattern can screen a whole serialized Step."""
    try:
        parsed = sre_parse.parse(source)
    except re.error:
        return False

    def clean(items: Any) -> bool:
        for op, av in items:
            if op in (sre_parse.AT, sre_parse.ASSERT, sre_parse.ASSERT_NOT):
                return False
            if op is sre_parse.BRANCH and not all(clean(branch) for branch in av[1]):
                return False
            if op is sre_parse.SUBPATTERN and not clean(av[-1]):
                return False
            if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT) and not clean(av[2]):
                return False
            if op is sre_parse.ATOMIC_GROUP and not clean(av):
                return False
            if op is sre_parse.GROUPREF_EXISTS and not (clean(av[1]) and (av[2] is None or clean(av[2]))):
                return False
        return True

    return clean(parsed.data)


@dataclass(frozen=True)
class RedactionRule:
    name: str
    pattern: re.Pattern[str]
    replacement: str = DEFAULT_REPLACEMENT
    attributes: tuple[str, ...] = ()  # empty: every string value
    check: Callable[[str], bool] | None = None
    screen: re.Pattern[str] | None = None  # None: every text might change (see might_change)
    literals: tuple[str, ...] = ()
    escape: str = _ANY_ESCAPE
    json_inert: bool = False  # see Builtin.json_inert; also needs a replacement without quotes or backslashes
    ascii_screen: bool = False  # see Builtin.ascii_screen
    prefix_chars: frozenset[str] = frozenset()  # see Builtin.prefix_chars
    _keys: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def applies_to(self, key: str) -> bool:
        if not self.attributes:
            return True
        known = self._keys.get(key)
        if known is None:
            if len(self._keys) >= _KEY_MEMO:
                self._keys.clear()
            known = self._keys[key] = any(fnmatch.fnmatchcase(key, glob) for glob in self.attributes)
        return known

    def might_change(self, text: str) -> bool:
        """False only when this rule changes neither ``text`` nor any string JSON-decoded from it, nor any text
        that ``text`` contains: a cheap look before the regex substitution and the JSON parsing."""
        if self.screen is None:
            return True
        if self.literals and not any(map(text.__contains__, self.literals)):
            return False
        return self.screen.search(text) is not None or self.escape in text

    def apply(self, text: str) -> str:
        if self.prefix_chars and self.check is None and self.screen is not None and len(text) > _SHORT_TEXT:
            return self._apply_from_screen(text, self.screen)
        if self.check is None:
            return self.pattern.sub(self.replacement, text)
        check, replacement = self.check, self.replacement
        return self.pattern.sub(lambda m: replacement if check(m.group(0)) else m.group(0), text)

    def _apply_from_screen(self, text: str, screen: re.Pattern[str]) -> str:
        """``pattern.sub`` for a pattern of ``prefix_chars`` then ``screen``: each screen match extended left over
        the prefix characters not already replaced (matches never overlap, as with ``sub``)."""
        pieces: list[str] = []
        done = 0  # the end of the last replacement
        prefix = self.prefix_chars
        for found in screen.finditer(text):
            start = found.start()
            while start > done and text[start - 1] in prefix:
                start -= 1
            if start == found.start():
                continue  # nothing before the screen's match: not the pattern's
            match = self.pattern.fullmatch(text, start, found.end())
            if match is None:  # cannot happen for a pattern of this shape; never redact less if it does
                return self.pattern.sub(self.replacement, text)
            replacement = self.replacement
            pieces += (text[done:start], match.expand(replacement) if "\\" in replacement else replacement)
            done = found.end()
        if not pieces:
            return text
        pieces.append(text[done:])
        return "".join(pieces)


def parse_rule(item: Any, where: str) -> RedactionRule:
    if isinstance(item, str):
        item = {"builtin": item}
    if not isinstance(item, Mapping):
        raise BadInputError(f"{where}: a rule is a built-in name ({', '.join(BUILTINS)}) or a mapping "
                            "{pattern, replacement, attributes}")
    unknown = sorted(set(item) - set(_RULE_KEYS))
    if unknown:
        raise BadInputError(f"{where}: {unknown[0]}: unknown key; accepted: {', '.join(_RULE_KEYS)}")
    if ("pattern" in item) == ("builtin" in item):
        raise BadInputError(f"{where}: give exactly one of pattern (a regex) or builtin ({', '.join(BUILTINS)})")
    replacement = item.get("replacement", DEFAULT_REPLACEMENT)
    if not isinstance(replacement, str):
        raise BadInputError(f"{where}: replacement: must be a string")
    globs = item.get("attributes", [])
    if isinstance(globs, str):
        globs = [globs]
    if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
        raise BadInputError(f"{where}: attributes: a list of attribute-key globs such as 'gen_ai.*'")
    check = None
    literals: tuple[str, ...] = ()
    if "builtin" in item:
        builtin = BUILTINS.get(str(item["builtin"]))
        if builtin is None:
            raise BadInputError(f"{where}: builtin {item['builtin']!r} is unknown; accepted: {', '.join(BUILTINS)}")
        source, check, name = builtin.pattern, builtin.check, str(item["builtin"])
        screen_source, literals, escape = builtin.screen, builtin.literals, _BUILTIN_ESCAPE
        json_inert = builtin.json_inert and not any(c in replacement for c in '"\\')
        ascii_screen, prefix_chars = builtin.ascii_screen, frozenset(builtin.prefix_chars)
    else:
        json_inert = ascii_screen = False
        prefix_chars = frozenset()
        source = item["pattern"]
        if not isinstance(source, str) or not source:
            raise BadInputError(f"{where}: pattern: must be a non-empty regex string")
        name = str(item.get("name") or source)
        screen_source, escape = source, _ANY_ESCAPE
    try:
        pattern = re.compile(source)
    except re.error as exc:
        raise BadInputError(f"{where}: pattern {source!r} is not a valid regex: {exc}") from None
    screen = re.compile(screen_source) if _only_inside(screen_source) else None
    if pattern.match(""):
        raise BadInputError(f"{where}: pattern {source!r} matches the empty string; it would redact nothing useful "
                            "and insert the replacement everywhere")
    try:
        pattern.sub(replacement, "")
        pattern.sub(replacement, source)
    except (re.error, IndexError) as exc:
        raise BadInputError(f"{where}: replacement {replacement!r} is invalid for this pattern: {exc}") from None
    return RedactionRule(name=str(item.get("name") or name), pattern=pattern, replacement=replacement,
                         attributes=tuple(globs), check=check, screen=screen, literals=literals, escape=escape,
                         json_inert=json_inert, ascii_screen=ascii_screen, prefix_chars=prefix_chars)


def _always(_text: str) -> bool:
    return True


def _combined_screen(rules: Sequence[RedactionRule]) -> Callable[[str], object]:
    """One callable, truthy for every text on which some rule's ``might_change`` holds (and maybe others).

    Literal tests when every rule has literals (``in`` beats a regex on short texts); else one regex, the
    alternation of each rule's literals or of its escape and screen (a regex matches somewhere if and only if one
    of its alternatives does); else, for a pattern with groups (its backreferences would be renumbered), each rule.
    """
    if not rules or any(rule.screen is None for rule in rules):
        return _always
    if all(rule.literals for rule in rules):
        literals = tuple(dict.fromkeys(literal for rule in rules for literal in rule.literals))

        return lambda text: any(map(text.__contains__, literals))
    alternatives: list[str] = []
    for rule in rules:
        screen = rule.screen
        if rule.literals:
            alternatives.extend(re.escape(literal) for literal in rule.literals)
        elif screen is not None and screen.groups == 0 and not screen.flags & ~re.UNICODE:
            alternatives.extend((re.escape(rule.escape), f"(?:{screen.pattern})"))
        else:
            return lambda text: any(rule.might_change(text) for rule in rules)
    try:
        return re.compile("|".join(dict.fromkeys(alternatives))).search
    except re.error:  # a pattern that only compiles on its own (global inline flags): screen rule by rule
        return lambda text: any(rule.might_change(text) for rule in rules)


class _RuleSet:
    """Rules applied together, with what they share worked out once: the combined screen and, for rules with
    attribute globs, which of them apply to each attribute key (remembered, bounded like ``applies_to``)."""

    __slots__ = ("_by_key", "globbed", "json_inert", "might_change_bytes", "rules", "screen")

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self.rules = tuple(rules)
        self.screen = _combined_screen(self.rules)
        self.globbed = any(rule.attributes for rule in self.rules)
        self.json_inert = all(rule.json_inert for rule in self.rules)
        self._by_key: dict[str, _RuleSet | None] = {}
        # On UTF-8 bytes (a serialized message) when every screen is ASCII-only: one regex, the alternation of each
        # rule's escape and screen (what might_change asks besides a literal); else None, and bytes are decoded.
        alternation = _alternation(self.rules)
        self.might_change_bytes: Callable[[bytes], object] | None = None
        if alternation is not None and all(rule.ascii_screen for rule in self.rules):
            search = re.compile(alternation.encode()).search
            self.might_change_bytes = search
            if all(rule.literals for rule in self.rules):
                # A rule changes nothing in a text without one of its literals (might_change): a byte search for
                # them (memchr fast) clears most messages before the regex, which tries every position.
                literals = tuple({literal.encode(): None for rule in self.rules for literal in rule.literals})
                self.might_change_bytes = lambda data: search(data) if any(map(data.__contains__, literals)) else None

    def for_key(self, key: str) -> _RuleSet | None:
        """The rules that apply to attribute ``key``; None when none does."""
        if not self.globbed:
            return self
        try:
            return self._by_key[key]
        except KeyError:
            pass
        if len(self._by_key) >= _KEY_MEMO:
            self._by_key.clear()
        matching = [rule for rule in self.rules if rule.applies_to(key)]
        found = self._by_key[key] = (self if len(matching) == len(self.rules)
                                     else _RuleSet(matching) if matching else None)
        return found

    def might_change(self, text: str) -> bool:
        # Rule by rule after the shared screen: each rule's screen starts with a literal the engine skips to,
        # where one alternation of them all would be tried at every position (ten times slower on long texts).
        return bool(self.screen(text)) and any(rule.might_change(text) for rule in self.rules)


def _alternation(rules: Sequence[RedactionRule]) -> str | None:
    """A regex matching wherever some rule's escape or screen does; None when a screen is missing or cannot be
    joined (groups would be renumbered, inline flags would apply to all)."""
    alternatives: dict[str, None] = {}
    for rule in rules:
        screen = rule.screen
        if screen is None or screen.groups or screen.flags & ~re.UNICODE:
            return None
        alternatives.update({re.escape(rule.escape): None, f"(?:{screen.pattern})": None})
    if not alternatives:
        return None
    try:
        re.compile("|".join(alternatives))
    except re.error:
        return None
    return "|".join(alternatives)


def _rule_set(rules: Sequence[RedactionRule] | _RuleSet) -> _RuleSet:
    return rules if isinstance(rules, _RuleSet) else _RuleSet(rules)


@dataclass
class Redactor:
    """Rules by project; ``"*"`` rules apply to every project, before the project's own."""

    rules: dict[str, tuple[RedactionRule, ...]] = field(default_factory=dict)
    # Per project with rules of its own (and "*" for every other): (all its rules, those without globs). Bounded
    # by the rules file, not by the projects clients name.
    _sets: dict[str, tuple[_RuleSet, _RuleSet]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_mapping(cls, document: Any, where: str) -> Redactor:
        if document is None:
            return cls()
        if not isinstance(document, Mapping):
            raise BadInputError(f"{where}: expected a mapping of project to a list of rules")
        rules: dict[str, tuple[RedactionRule, ...]] = {}
        for project, items in document.items():
            project = str(project)
            if project != ALL_PROJECTS:
                check_project(project, f"{where}: project")
            if not isinstance(items, list):
                raise BadInputError(f"{where}: {project}: expected a list of rules")
            rules[project] = tuple(parse_rule(item, f"{where}: {project}[{i}]") for i, item in enumerate(items))
        return cls(rules)

    @classmethod
    def load(cls, path: str | Path) -> Redactor:
        source = Path(path)
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInputError(f"--redact {source}: cannot read: {exc.strerror or exc}") from None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise BadInputError(f"--redact {source}: invalid YAML or JSON: {exc}") from None
        return cls.from_mapping(document, f"--redact {source}")

    def for_project(self, project: str) -> tuple[RedactionRule, ...]:
        every = self.rules.get(ALL_PROJECTS, ())
        return every if project == ALL_PROJECTS else every + self.rules.get(project, ())

    def _rule_sets(self, project: str) -> tuple[_RuleSet, _RuleSet]:
        """The project's rules and its rules without globs, each screened as one (built on first use)."""
        key = project if project in self.rules else ALL_PROJECTS
        sets = self._sets.get(key)
        if sets is None:
            rules = self.for_project(key)
            sets = self._sets[key] = (_RuleSet(rules), _RuleSet([r for r in rules if not r.attributes]))
        return sets

    # --- before mapping: decoded attributes, and the rest of the OTLP request ------------------------------

    def span_redaction(self, project: str) -> SpanRedaction | None:
        """What redacts one project's raw spans and resource attributes before mapping; None without rules."""
        rules, everywhere = self._rule_sets(project)
        return SpanRedaction(rules, everywhere) if rules.rules else None

    # --- after mapping: the steps -----------------------------------------------------------------------

    def redact_spans(self, project: str, spans: Sequence[MappedSpan]) -> None:
        """Redact the mapped steps' content, tool calls and attributes in place (rules without globs)."""
        everywhere = self._rule_sets(project)[1]
        if not everywhere.rules:
            return
        screen_bytes = everywhere.might_change_bytes
        for span in spans:
            # Every string of the step lies verbatim in its serialization: one screen of it usually clears them all.
            # The bytes are those the store writes; the span's raw attributes beside them were redacted decoded.
            data = span.step_bytes()
            if (screen_bytes(data) if screen_bytes is not None
                    else everywhere.might_change(data.decode("utf-8", "surrogateescape"))):
                _redact_message(span.step, everywhere, skip=_STEP_IDENTITY)


class SpanRedaction:
    """One project's rules on raw OTLP spans and resource attributes, before mapping: a span's decoded attributes
    (``attributes``: the mapper writes what changed back into the span, which is stored beside its step) and its
    events, links and status message (``rest``); the mapper reads nothing else of a span. ``span`` does both for
    one span, after a screen of its serialized bytes where the rules allow one."""

    __slots__ = ("_everywhere", "_rules", "_screen_bytes")

    def __init__(self, rules: _RuleSet, everywhere: _RuleSet) -> None:
        self._rules, self._everywhere = rules, everywhere
        # Literals only (a memchr-fast byte search): a span that passes is looked at value by value anyway.
        self._screen_bytes = _literal_screen(rules.rules) if _decoding_adds_no_literal(rules.rules) else None

    def attributes(self, attrs: dict[str, Any]) -> list[str]:
        """Decoded attributes (``attributes_to_dict``) redacted in place; returns the keys whose values changed."""
        return _redact_attributes(attrs, self._rules)

    def span(self, span: Span, attrs: dict[str, Any], serialized: bytes) -> bytes:
        """Redact one span (``serialized``, its bytes) and its decoded attributes ``attrs`` in place; returns the
        span's bytes after redaction (``serialized`` itself when nothing changed).

        Every string a span holds lies verbatim (UTF-8) in its bytes, and decoding adds only digits, base64, and
        the names of non-finite numbers: where the bytes hold none of the rules' literals (most spans), no value,
        decoded or not, can change, and nothing is looked at value by value. A repeated key is still written once
        either way (the dict kept its last value; see ``write_back``)."""
        attributes = span.attributes
        repeated = len(attrs) != len(attributes)
        screen = self._screen_bytes
        if screen is not None and not screen(serialized):
            if not repeated:
                return serialized
            write_back(span, attrs, ())
            return span.SerializeToString()
        touched = bool(span.events or span.links or span.status.message)
        if touched:
            self.rest(span)
        changed = _redact_attributes(attrs, self._rules)
        if changed or repeated:
            write_back(span, attrs, changed)
        return span.SerializeToString() if changed or repeated or touched else serialized

    def rest(self, span: Span) -> None:
        """The span's event and link attributes and its status message, in place."""
        for event in span.events:
            _redact_kvs(event.attributes, self._rules)
        for link in span.links:
            _redact_kvs(link.attributes, self._rules)
        if span.status.message and self._everywhere.rules:
            span.status.message = _apply(self._everywhere.rules, span.status.message)


# What decoding an attribute value may add to the text a span's bytes hold: a large int's digits and sign, bytes
# as base64, a non-finite double's name ("NaN", "-Infinity"); JSON-decoding a string is covered by each rule's
# screen (escapes included), as on any text.
_DECODED_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-")


def _decoding_adds_no_literal(rules: Sequence[RedactionRule]) -> bool:
    """Whether a screen of a span's serialized bytes is sound for its decoded values too: every rule needs one of
    its literals in a text it changes, and every literal has a character decoding never adds."""
    return bool(rules) and all(rule.literals and all(set(literal) - _DECODED_ALPHABET for literal in rule.literals)
                               for rule in rules)


def _literal_screen(rules: Sequence[RedactionRule]) -> Callable[[bytes], bool]:
    """Truthy for bytes holding some rule's literal (every rule has some: ``_decoding_adds_no_literal``)."""
    literals = tuple({literal.encode(): None for rule in rules for literal in rule.literals})
    return lambda data: any(map(data.__contains__, literals))


def _apply(rules: Iterable[RedactionRule], text: str) -> str:
    for rule in rules:
        text = rule.apply(text)
    return text


def _apply_json(rules: Sequence[RedactionRule], value: Any) -> Any:
    if isinstance(value, str):
        return _apply(rules, value)
    if isinstance(value, _Pairs):
        return _Pairs((key, _apply_json(rules, item)) for key, item in value)
    if isinstance(value, list):
        return [_apply_json(rules, item) for item in value]
    if isinstance(value, dict):
        return {key: _apply_json(rules, item) for key, item in value.items()}
    return value


def _redact_text(rules: _RuleSet, text: str) -> str:
    """A JSON document (messages, tool arguments) is redacted value by value, so escapes such as ``\\u0040``
    hide nothing and a replacement never breaks the JSON; any other text as it is."""
    if not rules.screen(text):
        return text
    if rules.json_inert and "\\" not in text:  # the same result as value by value, without parsing (see Builtin)
        return _apply(rules.rules, text)  # (looking closer first would cost as much as applying)
    if not rules.might_change(text):
        return text
    if text.lstrip()[:1] in ("[", "{"):
        try:
            document = json.loads(text, object_pairs_hook=_Pairs)
        except ValueError:
            pass
        else:
            redacted = _apply_json(rules.rules, document)
            return text if redacted == document else _dumps(redacted)
    return _apply(rules.rules, text)


class _Pairs(list[Any]):
    """A JSON object as its (key, value) pairs: a duplicate key keeps both values, so neither escapes redaction
    (a dict would keep only the last one, and the text would be judged unchanged)."""


def _dumps(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(f"{json.dumps(key, ensure_ascii=False)}:{_dumps(item)}" for key, item in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dumps(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _redact_attributes(attrs: dict[str, Any], rules: _RuleSet) -> list[str]:
    """Decoded attribute values in place: strings, and the strings inside lists and dicts (arrays and kvlists).
    Returns the keys whose values changed (the mapper writes those back into the OTLP span it stores)."""
    changed: list[str] = []
    for key, value in attrs.items():  # replacing values, never keys, is safe while iterating
        matching = rules.for_key(key) if rules.globbed else rules
        if matching is None:
            continue
        if type(value) is str:
            if not matching.screen(value):  # most strings: no call to _redact_text, whose first look this is
                continue
            redacted = _redact_text(matching, value)
        elif isinstance(value, list | dict):
            redacted = _redact_decoded(value, matching)
        else:
            continue
        if redacted != value:
            attrs[key] = redacted
            changed.append(key)
    return changed


def _redact_decoded(value: Any, rules: _RuleSet) -> Any:
    if isinstance(value, str):
        return _redact_text(rules, value)
    if isinstance(value, list):
        return [_redact_decoded(item, rules) for item in value]
    if isinstance(value, dict):
        return {key: _redact_decoded(item, rules) for key, item in value.items()}
    return value


def _redact_kvs(kvs: Iterable[KeyValue], rules: Sequence[RedactionRule] | _RuleSet) -> None:
    rule_set = _rule_set(rules)
    for kv in kvs:
        matching = rule_set.for_key(kv.key)
        if matching is None:
            continue
        value = kv.value
        # A string, most values, is screened here: most texts pass nothing on to _redact_text.
        if value.WhichOneof("value") == "string_value":
            text = value.string_value
            if matching.screen(text):
                value.string_value = _redact_text(matching, text)
        else:
            _redact_any(value, matching)


def _redact_any(value: AnyValue, rules: Sequence[RedactionRule] | _RuleSet) -> None:
    rule_set = _rule_set(rules)
    kind = value.WhichOneof("value")
    if kind == "string_value":
        value.string_value = _redact_text(rule_set, value.string_value)
    elif kind == "array_value":
        for item in value.array_value.values:
            _redact_any(item, rule_set)
    elif kind == "kvlist_value":
        for kv in value.kvlist_value.values:
            _redact_any(kv.value, rule_set)


def _redact_message(message: Message, rules: _RuleSet, skip: frozenset[str] = frozenset()) -> None:
    for descriptor, value in message.ListFields():
        if descriptor.name in skip:
            continue
        if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            value_field = descriptor.message_type.fields_by_name["value"]
            container = getattr(message, descriptor.name)
            for key in list(container):
                if value_field.message_type is not None:
                    _redact_message(container[key], rules)
                elif value_field.type == value_field.TYPE_STRING:
                    container[key] = _redact_text(rules, container[key])
        elif descriptor.is_repeated:
            container = getattr(message, descriptor.name)
            if descriptor.message_type is not None:
                for item in container:
                    _redact_message(item, rules)
            elif descriptor.type == descriptor.TYPE_STRING:
                container[:] = [_redact_text(rules, item) for item in container]
        elif descriptor.message_type is not None:
            _redact_message(value, rules)
        elif descriptor.type == descriptor.TYPE_STRING:
            setattr(message, descriptor.name, _redact_text(rules, value))


__all__ = ["BUILTINS", "DEFAULT_REPLACEMENT", "RedactionRule", "Redactor", "SpanRedaction", "parse_rule"]
