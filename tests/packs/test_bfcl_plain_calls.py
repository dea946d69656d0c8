"""BFCL's text decode reads plain answers (``[f(a=1, b='x')]``) without Python's parser, and gives exactly what the
parser's path gives: on generated answers mixing the plain shape with what it leaves to the parser (escapes, tuples,
operators, keywords as names, positional arguments, non-ASCII names, leading whitespace, repeated keywords,
unhashable dict keys), the same calls (types included: 1, 1.0 and True differ), the same DecodeError message, the
same exception."""

from __future__ import annotations

import random

import pytest

from evalsi.packs.benchmarks import bfcl_calls

_ATOMS = ["1", "0", "-5", "-0", "-0.0", "2.5", "10.50", "007", "1e5", ".5", "5.", "1_0", "3j", "'x'", '"y"', "'it''s'",
          "'a\\nb'", "'\u00fc'", "'\u2028'", "'\x00'", "'\ud800'", "''", "True", "False", "None", "foo", "if",
          "__debug__", "match", "...", "x.y", "g()", "g(a=1)", "h.k(b='c')", "(1)", "(1,)", "()", "{1, 2}", "-True",
          "- 5", "--5", "+5", "not 5", "~5", "1+2", "2**3", "a[0]", "b'x'", "r'x'", "f'x'", "[1, 2]", "[]", "{}",
          "{'k': 1}", "{1: 'a', 1.0: 'b'}", "{'a': 1, 'a': 2}", "{[1]: 2}", "{g(a=1): 2}", "{True: None}",
          "'\u00e9t\u00e9'", "\u00fcber", "lambda", "'\x7f'", "'\t'", "123456789012345678901234567890",
          "1.000000000000000000000000000001", "'\"'", "\"'\""]
_PLAIN_ATOMS = [a for a in _ATOMS if bfcl_calls.plain_calls(f"[f(a={a})]") is not None]
_NAMES = ["f", "a.b", "geometry.area", "if", "True", "x_1", "\u00fc", "a . b", "f "]
_KEYS = ["a", "b", "c", "d", "_", "match", "if", "True", "__debug__"]


class _Answers:
    def __init__(self, seed: int, plain_share: float) -> None:
        self.rng = random.Random(seed)
        self.plain_share = plain_share  # how often a piece is drawn from what the plain reader takes

    def pick(self, plain: list[str], other: list[str]) -> str:
        return self.rng.choice(plain if self.rng.random() < self.plain_share else other)

    def value(self, depth: int = 0) -> str:
        roll = self.rng.random()
        if depth > 3 or roll < 0.6:
            return self.pick(_PLAIN_ATOMS, _ATOMS)
        if roll < 0.75:
            items = ", ".join(self.value(depth + 1) for _ in range(self.rng.randint(0, 3)))
            return "[" + items + self.rng.choice(["", ","]) + "]"
        if roll < 0.9:
            pairs = ", ".join(f"{self.pick(_PLAIN_ATOMS[:30], _ATOMS)}: {self.value(depth + 1)}"
                              for _ in range(self.rng.randint(0, 3)))
            return "{" + pairs + "}"
        return self.call(depth + 1)

    def call(self, depth: int = 0) -> str:
        arguments = [f"{self.pick(_KEYS[:6], _KEYS)}{self.pick(['='], ['=', ' = ', '=='])}{self.value(depth)}"
                     for _ in range(self.rng.randint(0, 3))]
        if self.rng.random() < 0.05:
            arguments.append(self.rng.choice(["1", "**k", "*a"]))
        separator = self.rng.choice([", ", ",", ",\n", ", \t"])
        return self.pick(_NAMES[:3], _NAMES) + "(" + separator.join(arguments) + self.rng.choice(["", ",", " "]) + ")"

    def answer(self) -> str:
        calls = self.rng.choice([", ", ",", ",\n ", " "]).join(self.call() for _ in range(self.rng.randint(0, 3)))
        frame = self.pick(["[{}]", "{}", "[{},]"], ["```[{}]```", "'[{}]'", "' [{}]'", "[{}] ", "\n[{}]\n",
                                                     "[ {} ]", "[{}]\r", "\t[{}]"])
        return frame.format(calls)


def _decoded(text: str) -> tuple[str, str]:
    try:
        return "calls", repr(bfcl_calls.text_calls(text))  # repr: 1, 1.0, True and (1,) vs [1] differ
    except Exception as exc:  # the parser's path raises more than DecodeError (TypeError): so may this
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(("seed", "plain_share"), [(0, 0.9), (1, 0.9), (2, 0.5), (3, 0.2)])
def test_plain_answers_decode_as_the_parser_decodes_them(seed: int, plain_share: float,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    answers = _Answers(seed, plain_share)
    texts = [answers.answer() for _ in range(6000)]
    fast = [_decoded(text) for text in texts]
    read_plain = sum(bfcl_calls.plain_calls(bfcl_calls.call_source(text)) is not None for text in texts)
    monkeypatch.setattr(bfcl_calls, "plain_calls", lambda source: None)
    for text, got in zip(texts, fast, strict=True):
        assert got == _decoded(text), text
    assert read_plain > 600 and sum(kind == "calls" for kind, _ in fast) > 1200


def test_plain_reader_edges() -> None:
    plain = bfcl_calls.plain_calls
    assert repr(plain("[f(a=1, b=2.0, c=True, d=None, e='x', g=[1, 'y'], h={'k': -1.5}, i=x)]")) == repr(
        [{"f": {"a": 1, "b": 2.0, "c": True, "d": None, "e": "x", "g": [1, "y"], "h": {"k": -1.5}, "i": "x"}}])
    assert plain("[a.b.c(x=g(y=1)), d()]") == [{"a.b.c": {"x": {"g": {"y": 1}}}}, {"d": {}}]
    assert plain("[]") == [] and plain("[\n]") == []
    for text in (" [f()]", "[f(1)]", "[f(a=1, a=2)]", "[f(a=(1,))]", "[f(a='\\n')]", "[f(a=g())]", "[f(a=1+2)]",
                 "[f(a={[1]: 2})]", "[f(if=1)]", "[f(a=__debug__)]", "[x]", "[f(a=1)] [g()]", "[f(a=1)]]"):
        assert plain(text) is None, text
    nested: list[object] = []
    for _ in range(39):
        nested = [nested]
    deep = "[f(a=" + "[" * 40 + "]" * 40 + ")]"  # deeper than the plain reader goes: the parser reads it
    assert plain(deep) is None and bfcl_calls.text_calls(deep) == [{"f": {"a": nested}}]


@pytest.mark.parametrize("text", ["[f(a={[1]: 2})]", "[f(a={(1, [2]): 2})]", "[f(a={'k': {[]: 1}})]"])
def test_an_unhashable_dict_key_is_a_decode_failure_as_in_bfcl(text: str) -> None:
    # BFCL's decode builds the dict and fails; its checker counts that as the decoder failing, not as a crash.
    with pytest.raises(bfcl_calls.DecodeError, match="unhashable type: 'list'"):
        bfcl_calls.text_calls(text)
