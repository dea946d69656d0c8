"""Load case YAML from files and directory trees, validating every field with its file and line.

A file holds one case, or several as YAML documents separated by ``---``. A document that does not validate
becomes a ``BrokenCase`` carrying the message (``cases/cart.yaml:14: state.cart: unknown state key; ...``),
so the report lists it instead of the suite shrinking in silence. Only a missing source or a source with no
case files at all is a ``BadInputError`` (nothing could run).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from evalsi.cases.model import (
    DEFAULT_TENANT,
    DETECTORS,
    POLICIES,
    STATE_KEYS,
    BrokenCase,
    Case,
    CaseTurn,
    Expect,
    Policy,
    Requires,
)
from evalsi.errors import BadInputError
from evalsi.patterns import PatternError, compile_user_pattern

FieldPath = tuple[str | int, ...]

CASE_KEYS = ("id", "agent", "tenant", "turns", "state", "requires", "persona", "expect", "reference")
TURN_KEYS = ("user", "tools_called")
REQUIRES_KEYS = ("tools", "capabilities")
PERSONA_KEYS = ("goal", "style", "opens_with", "knows", "max_turns")
REFERENCE_KEYS = ("source", "messages")
REFERENCE_MESSAGE_KEYS = ("role", "text", "origin")
EXPECT_KEYS = (
    "tools_called", "never_calls", "calls_one_of", "first_tool", "max_tool_calls", "reply_includes",
    "reply_omits", "blocked_gates", "ui_components", "no_ui", "must_not", "claims", "policy", "rubric",
    "min_score",
)
CASE_SUFFIXES = (".yaml", ".yml")


class CaseError(Exception):
    """One validation failure, already formatted with file, line and field."""


def load_cases(source: str | Path) -> list[Case | BrokenCase]:
    """Every case under ``source`` (a file or a directory tree), in path order, broken ones included."""
    loaded: list[Case | BrokenCase] = []
    first_seen: dict[str, str] = {}
    for file in case_files(source):
        for item in load_file(file):
            if isinstance(item, Case):
                if item.id in first_seen:
                    item = BrokenCase(
                        item.file, item.line, f"{item.where}: id: duplicate case id {item.id!r}, first defined at "
                        f"{first_seen[item.id]}; ids must be unique in a source", item.id, item.agent,
                    )
                else:
                    first_seen[item.id] = item.where
            loaded.append(item)
    return loaded


def case_files(source: str | Path) -> list[Path]:
    """The case files of ``source``: the file itself, or every ``*.yaml``/``*.yml`` under the directory."""
    root = Path(source)
    if not root.exists():
        raise BadInputError(f"--source {source}: no such file or directory")
    if not root.is_dir():
        return [root]
    # <source>/evals.yaml is the cases' panel configuration (cases/judging.py), not a case.
    files = sorted(p for p in root.rglob("*")
                   if p.is_file() and p.suffix.lower() in CASE_SUFFIXES and p != root / "evals.yaml")
    if not files:
        raise BadInputError(f"--source {source}: no case files (*.yaml, *.yml) under this directory")
    return files


def load_file(file: str | Path) -> list[Case | BrokenCase]:
    """The cases in one file; an unreadable file or invalid YAML is one broken entry naming the line."""
    path = Path(file)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return [BrokenCase(name, 1, f"{name}: not UTF-8 text ({exc.reason})")]
    except OSError as exc:
        return [BrokenCase(name, 1, f"{name}: cannot read ({exc.strerror})")]
    return load_text(text, name)


def load_text(text: str, name: str, *, first_line: int = 1) -> list[Case | BrokenCase]:
    """The cases in YAML ``text`` named ``name`` (a file, or a stored case's path in its corpus).

    ``first_line`` is where ``text`` began in its file: a case stored from the middle of a multi-document
    file reports the lines of that file, not of its own slice.
    """
    # Blank lines in front shift every mark PyYAML reports, so each line number below stays the file's.
    text = "\n" * (first_line - 1) + text
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        return [BrokenCase(name, line, f"{name}:{line}: invalid YAML: {exc.problem or exc.context}")]
    except yaml.YAMLError as exc:
        return [BrokenCase(name, 1, f"{name}: invalid YAML: {exc}")]
    out: list[Case | BrokenCase] = []
    for node in nodes:
        if node is None:
            continue
        out.append(_load_document(node, name))
    if not out:
        out.append(BrokenCase(name, first_line, f"{name}: empty; expected a case (id, agent, turns, expect)"))
    return out


def _load_document(node: yaml.Node, name: str) -> Case | BrokenCase:
    line = node.start_mark.line + 1
    lines: dict[FieldPath, int] = {}
    try:
        _node_lines(node, (), lines, name)
        document = SafeConstructor().construct_document(node)
    except CaseError as exc:
        return BrokenCase(name, line, str(exc))
    except yaml.YAMLError as exc:
        return BrokenCase(name, line, f"{name}:{line}: invalid YAML: {exc}")
    ident = document.get("id") if isinstance(document, dict) else None
    agent = document.get("agent") if isinstance(document, dict) else None
    try:
        return _Parser(name, lines, line).case(document)
    except CaseError as exc:
        return BrokenCase(
            name, line, str(exc), ident if isinstance(ident, str) else None, agent if isinstance(agent, str) else None
        )


def _node_lines(node: yaml.Node, path: FieldPath, lines: dict[FieldPath, int], name: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            here = (*path, key_node.value)
            if key_node.value in seen:
                raise CaseError(f"{name}:{key_node.start_mark.line + 1}: {format_path(here)}: duplicate key")
            seen.add(key_node.value)
            lines[here] = key_node.start_mark.line + 1
            _node_lines(value_node, here, lines, name)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _node_lines(item, (*path, index), lines, name)


def format_path(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


class _Parser:
    def __init__(self, name: str, lines: Mapping[FieldPath, int], line: int) -> None:
        self.name = name
        self.lines = lines
        self.line = line

    def fail(self, path: FieldPath, message: str) -> CaseError:
        line = self.line
        for cut in range(len(path), -1, -1):  # the nearest line the YAML gave us
            if path[:cut] in self.lines:
                line = self.lines[path[:cut]]
                break
        return CaseError(f"{self.name}:{line}: {format_path(path)}: {message}")

    # --- shapes ---------------------------------------------------------------------------------------

    def mapping(self, value: Any, path: FieldPath, keys: Sequence[str] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_kind(value)}")
        if keys is not None:
            for key in value:
                if key not in keys:
                    raise self.fail((*path, str(key)), f"unknown key; accepted: {', '.join(keys)}")
        return value

    def string(self, value: Any, path: FieldPath, *, empty: bool = False) -> str:
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise self.fail(path, f"expected a non-empty string, got {_kind(value)}")
        return value

    def strings(self, value: Any, path: FieldPath) -> tuple[str, ...]:
        if isinstance(value, str):  # `never_calls: search_products` reads as a list of one
            value = [value]
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list of strings, got {_kind(value)}")
        return tuple(self.string(item, (*path, i)) for i, item in enumerate(value))

    def integer(self, value: Any, path: FieldPath, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(path, f"expected an integer >= {minimum}, got {value!r}")
        return value

    # --- the case -------------------------------------------------------------------------------------

    def case(self, document: Any) -> Case:
        doc = self.mapping(document, (), CASE_KEYS)
        for key in ("id", "agent"):
            if key not in doc:
                raise self.fail((), f"missing required key {key!r}")
        ident = self.string(doc["id"], ("id",))
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", ident):
            raise self.fail(("id",), f"{ident!r}: use letters, digits, '.', '_' and '-' (it names conversations)")
        has_turns, has_persona = "turns" in doc, "persona" in doc
        if has_turns == has_persona:
            raise self.fail((), "a case has exactly one of 'turns' (a replay) and 'persona' (a simulated user)")
        turns = self.turns(doc["turns"]) if has_turns else ()
        persona = self.persona(doc["persona"]) if has_persona else None
        expect = self.expect(doc.get("expect") if doc.get("expect") is not None else {})
        return Case(
            id=ident,
            agent=self.string(doc["agent"], ("agent",)),
            file=self.name,
            line=self.line,
            tenant=self.string(doc["tenant"], ("tenant",)) if "tenant" in doc else DEFAULT_TENANT,
            turns=turns,
            state=self.state(doc["state"]) if doc.get("state") is not None else {},
            requires=self.requires(doc["requires"]) if doc.get("requires") is not None else Requires(),
            persona=persona,
            expect=expect,
            reference=self.reference(doc["reference"]) if doc.get("reference") is not None else None,
        )

    def turns(self, value: Any) -> tuple[CaseTurn, ...]:
        path: FieldPath = ("turns",)
        if not isinstance(value, list) or not value:
            raise self.fail(path, f"expected a non-empty list of turns ({{user: ...}}), got {_kind(value)}")
        out = []
        for i, item in enumerate(value):
            turn = self.mapping(item, (*path, i), TURN_KEYS)
            if "user" not in turn:
                raise self.fail((*path, i), "missing required key 'user'")
            tools = turn.get("tools_called")
            out.append(CaseTurn(
                user=self.string(turn["user"], (*path, i, "user")),
                tools_called=self.strings(tools, (*path, i, "tools_called")) if tools is not None else None,
            ))
        return tuple(out)

    def state(self, value: Any) -> dict[str, Any]:
        path: FieldPath = ("state",)
        state = self.mapping(value, path)
        for key in state:
            if key not in STATE_KEYS:
                raise self.fail((*path, str(key)), f"unknown state key; accepted: {', '.join(STATE_KEYS)}")
        if "evidence" in state:
            evidence = self.mapping(state["evidence"], (*path, "evidence"), ("ids", "cards"))
            if "ids" in evidence:
                self.strings(evidence["ids"], (*path, "evidence", "ids"))
            cards = evidence.get("cards", [])
            if not isinstance(cards, list):
                raise self.fail((*path, "evidence", "cards"), f"expected a list of cards, got {_kind(cards)}")
            for i, card in enumerate(cards):
                card_path = (*path, "evidence", "cards", i)
                self.mapping(card, card_path)
                for key in ("url", "id"):
                    if key not in card:
                        raise self.fail(card_path, f"a card needs {key!r} (each card needs a url and an id)")
                    self.string(card[key], (*card_path, key))
        if "memory" in state:
            self.mapping(state["memory"], (*path, "memory"))
        if "briefing" in state:
            self.mapping(state["briefing"], (*path, "briefing"))
        if "history" in state:
            history = state["history"]
            if not isinstance(history, list):
                raise self.fail((*path, "history"), f"expected a list of messages, got {_kind(history)}")
            for i, message in enumerate(history):
                message_path = (*path, "history", i)
                self.mapping(message, message_path)
                role = message.get("role")
                if role not in ("user", "assistant"):
                    raise self.fail((*message_path, "role"), f"expected 'user' or 'assistant', got {role!r}")
                self.string(message.get("content"), (*message_path, "content"), empty=True)
        return dict(state)

    def requires(self, value: Any) -> Requires:
        path: FieldPath = ("requires",)
        requires = self.mapping(value, path, REQUIRES_KEYS)
        return Requires(
            tools=self.strings(requires.get("tools", []), (*path, "tools")),
            capabilities=self.strings(requires.get("capabilities", []), (*path, "capabilities")),
        )

    def persona(self, value: Any) -> dict[str, Any]:
        path: FieldPath = ("persona",)
        persona = self.mapping(value, path, PERSONA_KEYS)
        if "goal" not in persona:
            raise self.fail(path, "missing required key 'goal'")
        self.string(persona["goal"], (*path, "goal"))
        for key in ("style", "opens_with"):
            if key in persona:
                self.string(persona[key], (*path, key))
        if "knows" in persona:
            self.mapping(persona["knows"], (*path, "knows"))
        if "max_turns" in persona:
            self.integer(persona["max_turns"], (*path, "max_turns"), 1)
        return dict(persona)

    def reference(self, value: Any) -> dict[str, Any]:
        path: FieldPath = ("reference",)
        reference = self.mapping(value, path, REFERENCE_KEYS)
        messages = reference.get("messages")
        if not isinstance(messages, list) or not messages:
            raise self.fail((*path, "messages"), f"expected a non-empty list of messages, got {_kind(messages)}")
        for i, message in enumerate(messages):
            message_path = (*path, "messages", i)
            self.mapping(message, message_path, REFERENCE_MESSAGE_KEYS)
            if message.get("role") not in ("user", "assistant"):
                raise self.fail((*message_path, "role"), f"expected 'user' or 'assistant', got {message.get('role')!r}")
            self.string(message.get("text"), (*message_path, "text"))
            if "origin" in message and message["origin"] not in ("model", "operator"):
                raise self.fail((*message_path, "origin"), f"expected 'model' or 'operator', got {message['origin']!r}")
        return dict(reference)

    # --- expect ---------------------------------------------------------------------------------------

    def expect(self, value: Any) -> Expect:
        path: FieldPath = ("expect",)
        expect = self.mapping(value, path, EXPECT_KEYS)
        fields: dict[str, Any] = {}
        for key in ("tools_called", "never_calls", "calls_one_of", "reply_includes", "reply_omits", "ui_components"):
            if expect.get(key) is not None:
                fields[key] = self.strings(expect[key], (*path, key))
        if expect.get("first_tool") is not None:
            fields["first_tool"] = self.string(expect["first_tool"], (*path, "first_tool"))
        if expect.get("max_tool_calls") is not None:
            fields["max_tool_calls"] = self.integer(expect["max_tool_calls"], (*path, "max_tool_calls"), 0)
        if expect.get("blocked_gates") is not None:
            pairs = []
            for i, item in enumerate(self.strings(expect["blocked_gates"], (*path, "blocked_gates"))):
                tool, sep, gate = item.partition(":")
                if not sep or not tool or not gate:
                    raise self.fail((*path, "blocked_gates", i), f"{item!r}: expected 'tool:gate'")
                pairs.append((tool, gate))
            fields["blocked_gates"] = tuple(pairs)
        if "no_ui" in expect:
            if not isinstance(expect["no_ui"], bool):
                raise self.fail((*path, "no_ui"), f"expected true or false, got {expect['no_ui']!r}")
            fields["no_ui"] = expect["no_ui"]
        if expect.get("claims") is not None:
            claims = self.mapping(expect["claims"], (*path, "claims"))
            compiled = {}
            for tool, pattern in claims.items():
                pattern = self.string(pattern, (*path, "claims", str(tool)))
                try:  # RE2: a case file's pattern must not be able to stall a grader (evalsi.patterns)
                    compiled[str(tool)] = compile_user_pattern(pattern, "claims", ignore_case=True)
                except PatternError as exc:
                    raise self.fail((*path, "claims", str(tool)), f"regex does not compile: {exc.problem}") from None
            fields["claims"] = compiled
        if expect.get("must_not") is not None:
            detectors = self.strings(expect["must_not"], (*path, "must_not"))
            for i, detector in enumerate(detectors):
                if detector not in DETECTORS:
                    raise self.fail((*path, "must_not", i), f"unknown detector {detector!r}; known: "
                                    f"{', '.join(DETECTORS)}")
            if "phantom_action" in detectors and not fields.get("claims"):
                raise self.fail((*path, "must_not"), "phantom_action reads expect.claims ({tool: regex}); none given")
            fields["must_not"] = detectors
        if expect.get("policy") is not None:
            fields["policy"] = self.policy(expect["policy"], (*path, "policy"))
        if expect.get("rubric") is not None:
            fields["rubric"] = self.string(expect["rubric"], (*path, "rubric"))
        if expect.get("min_score") is not None:
            score = expect["min_score"]
            if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
                raise self.fail((*path, "min_score"), f"expected a number in [0, 1], got {score!r}")
            fields["min_score"] = float(score)
        return Expect(**fields)

    def policy(self, value: Any, path: FieldPath) -> Policy:
        accepted = f"accepted: {', '.join(POLICIES)}, or {{ask_once: {{max: N}}}}"
        if isinstance(value, str):
            if value not in POLICIES:
                raise self.fail(path, f"unknown policy {value!r}; {accepted}")
            return Policy(value)
        if not isinstance(value, dict) or len(value) != 1:
            raise self.fail(path, f"expected one policy, got {_kind(value)}; {accepted}")
        ((name, options),) = value.items()
        if name not in POLICIES:
            raise self.fail((*path, str(name)), f"unknown policy {name!r}; {accepted}")
        if options is None:
            return Policy(name)
        allowed = ("max",) if name == "ask_once" else ()
        options = self.mapping(options, (*path, name), allowed)
        if "max" in options:
            return Policy(name, self.integer(options["max"], (*path, name, "max"), 1))
        return Policy(name)


def iter_cases(items: Sequence[Case | BrokenCase]) -> Iterator[Case]:
    return (item for item in items if isinstance(item, Case))
