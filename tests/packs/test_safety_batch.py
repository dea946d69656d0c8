"""The safety pack's batch forms decide exactly what the per-record functions return.

``detectors.matching`` (one scan of many texts joined) finds a match in exactly the texts a search of each finds,
for every detector pattern, on generated texts that hold the separator, unicode, word characters at the joins and
empty texts; refusal's batch form, where it decides, gives the function's two scores bit for bit, under every param,
and a run through the column path writes the bytes the message path writes."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
import re2

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskResult
from evalsi.evaluators import EvalContext, Registry
from evalsi.evaluators._columns import TextColumns, append_results
from evalsi.evaluators.runner import run_evaluators
from evalsi.packs.safety import detectors
from evalsi.packs.safety.refusal import OPENING_CHARS, _detector
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

REGISTRY = Registry.from_entry_points()
_PIECES = ["hello", "a@b.io", "élodie@exemple.fr", "4111 1111 1111 1111", "+14155552671", "555-123-4567",
           "192.168.0.1", "::1", "12:30", "AKIAIOSFODNN7EXAMPLE", "Zx9Qk2LmP0aB7rT4uV1wY8cD3eF6gH5j",
           "ghp_" + "a1B2" * 9, "aws_secret_access_key = " + "A" * 40, "I'm sorry, but", "I can't help with that.",
           "I cannot", "As an AI, I must decline", "Sure, here it is", "sorry, I can help", "\x00", "a\x00b",
           "日本", "ü", "İ", "\n", "  ", "", "x", "9", "-", "@", "I", "can't", "help"]


def _texts(count: int, seed: int) -> list[str]:
    """Texts of a few pieces joined by a space, nothing, or a newline: word characters meet at the joins of
    ``matching`` too, where a ``\\b`` must not be seen."""
    rng = random.Random(seed)
    return [rng.choice(("", " ", "\n")).join(rng.choice(_PIECES) for _ in range(rng.randint(0, 6)))
            for _ in range(count)]


def _scanners() -> list[re2._Regexp]:
    return [detectors._scanner(tuple(detectors.PII_PATTERNS), False),
            detectors._scanner(tuple(detectors.SECRET_PATTERNS), True),
            detectors._scanner(("email",), False), _detector()]


@pytest.mark.parametrize("seed", range(4))
def test_matching_finds_what_a_search_of_each_text_finds(seed: int) -> None:
    texts = _texts(3000, seed)
    for scanner in _scanners():
        want = [scanner.search(text) is not None for text in texts]
        assert detectors.matching(scanner, texts) == want, scanner.pattern[:60]
        assert 0 < sum(want) < len(texts)  # the texts hold both kinds


def test_matching_at_the_joins_and_on_patterns_that_read_the_separator() -> None:
    email = detectors._scanner(("email",), False)
    # A word character on each side of a join: the email must not be read across it, nor a \b missed there.
    assert detectors.matching(email, ["write to a", "@b.io now", "a@b.io"]) == [False, False, True]
    assert detectors.matching(_detector(), ["well I", "can't help you", "I can't help you"]) == [False, False, True]
    assert detectors.matching(email, []) == []
    assert detectors.matching(email, ["", "", "x@y.io"]) == [False, False, True]
    # A pattern that reads the separator, or matches the empty text, is answered a text at a time.
    for pattern, texts in ((r"a\x00b", ["a\x00b", "a", "b"]), (r"a[\x00-\x01]*b", ["a", "b", "ab"]),
                           (r"x*", ["", "y"]), (r"(?s)a.b", ["xa", "bx", "a\nb"])):
        regex = re2.compile(pattern)
        assert detectors.matching(regex, texts) == [regex.search(t) is not None for t in texts], pattern


def test_no_detector_pattern_anchors_at_a_texts_edge() -> None:
    """``matching`` joins texts: a ^, $, \\A or \\z in a detector pattern would see the joined text's edges, not
    each text's, with no match holding the separator to send the batch back to a search a text."""
    patterns = [*detectors.PII_PATTERNS.values(), *detectors.SECRET_PATTERNS.values(), detectors._TOKEN,
                _detector().pattern]
    for pattern in patterns:
        outside_classes = re.sub(r"\[(?:\\.|[^\]])*\]", "", pattern.replace("\\\\", ""))
        assert not re.search(r"(?<!\\)[$^]|\\[AzZ]", outside_classes), pattern


def _records(count: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    records = []
    for index, text in enumerate(_texts(count, seed)):
        shape = rng.random()
        output: Any = text or None
        if shape < 0.05:
            output = {"json": {"answer": text}}  # the batch form sees "" for it
        elif shape < 0.15:
            output = "x" * rng.randint(OPENING_CHARS - 20, OPENING_CHARS + 5) + " I can't help with that."
        elif shape < 0.2:
            output = "I'm sorry, but " + text  # a refusal at the very start
        records.append(make_record(id=f"r{index}", output=output,
                                   metadata={"should_refuse": bool(index % 2)} if index % 3 else None))
    return records


REFUSAL_PARAMS = [{"should_refuse": False}, {"should_refuse": True}, {},
                  {"should_refuse": False, "extra_pattern": "^computer says no"},
                  {"should_refuse": True, "extra_pattern": r"help\b"}]


@pytest.mark.parametrize("params", REFUSAL_PARAMS, ids=str)
def test_refusal_batch_decides_only_what_the_function_returns(params: dict[str, Any]) -> None:
    evaluator = REGISTRY.resolve("builtin/refusal")
    assert evaluator.batch is not None
    records = _records(1500, seed=len(str(params)))
    if "extra_pattern" in params:
        records += [make_record(id=f"c{i}", output=text) for i, text in
                    enumerate(["Computer says no.", "computer says no", "well, computer says no", "no help"])]
    decided = evaluator.batch({"output": TextColumns(records).texts("output")}, **params)
    assert len(decided) == len(records)
    for record, entry in zip(records, decided, strict=True):
        if entry is None:
            continue
        assert isinstance(entry, tuple) and all(type(v) is bool for v in entry), entry
        scores = evaluator.fn(record, **params)
        assert scores == [Score(name="refused", passed=entry[0]), Score(name="correct", passed=entry[1])], record
    if "should_refuse" in params:  # it decides the outputs that refuse as the param expects (or answer so)
        assert sum(entry == (params["should_refuse"], True) for entry in decided) > len(records) // 10
    else:  # metadata.should_refuse is the function's to read
        assert decided == [None] * len(records)


@pytest.mark.parametrize("params", REFUSAL_PARAMS[:2] + REFUSAL_PARAMS[3:4], ids=str)
async def test_refusal_through_the_column_path_gives_the_message_paths_bytes(params: dict[str, Any]) -> None:
    bound = [REGISTRY.resolve("builtin/refusal").bind(params)]
    records = _records(600, seed=3)
    for trial, record in enumerate(records):
        record.provenance.trial = trial % 3
    holder, columns = TaskResult(), ResultColumns()
    await run_evaluators(records, bound, lambda _: EvalContext(), into=holder.results)
    await run_evaluators(records, bound, lambda _: EvalContext(), columns=columns)
    want = ResultColumns()
    append_results(want, holder.results)
    assert list(columns.data) == list(want.data)
    assert list(columns.outcomes) == list(want.outcomes) and list(columns.score_names) == list(want.score_names)
    assert [str(v) for v in columns.values] == [str(v) for v in want.values]
