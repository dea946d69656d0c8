"""Batch forms of the core pack's evaluators decide exactly what the per-record function does.

Generated records (unicode, case folds that change length, whitespace, empty and missing texts, JSON contents, JSON
list references) under every param combination: where a batch form decides a record, the function returns that
same bare bool, or the same failing Score with its explanation; and a run through the runner's column path gives
the bytes the message path gives."""

from __future__ import annotations

import itertools
import random

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskResult
from evalsi.evaluators import EvalContext, Registry, Verdict
from evalsi.evaluators._columns import TextColumns, append_results
from evalsi.evaluators.runner import run_evaluators
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

_PIECES = ["Paris", "paris", " Paris ", "PARIS.", "the Paris", "Straße", "STRASSE", "İstanbul", "i̇stanbul", "日本",
           "日本 ", "a\u00a0b", "a b", "", "  ", "42", "Ω", "ω", "The  answer", "answer", "ﬁ", "fi"]


def _records(count: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    records = []
    for index in range(count):
        output: object = rng.choice(_PIECES)
        reference: object = rng.choice(_PIECES)
        shape = rng.random()
        if shape < 0.05:
            output = {"json": {"answer": output}}
        elif shape < 0.1:
            reference = {"json": [reference, rng.choice(_PIECES)]}
        elif shape < 0.13:
            output = None
        elif shape < 0.16:
            reference = None
        elif shape < 0.5:
            reference = output  # equal texts, the common case
        records.append(make_record(id=f"r{index}-é", output=output or None, reference=reference or None))
    return records


PARAMS = [dict(zip(("normalize", "ignore_punctuation", "ignore_articles"), flags, strict=True))
          for flags in itertools.product((True, False), repeat=3)]


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: "-".join(k for k, v in p.items() if v) or "none")
def test_exact_match_batch_decides_only_what_the_function_returns(params) -> None:
    evaluator = Registry.from_entry_points().resolve("builtin/exact-match")
    assert evaluator.batch is not None
    records = _records(600, seed=len(str(params)))
    texts = TextColumns(records)
    decided = evaluator.batch({"output": texts.texts("output"), "reference": texts.texts("reference")}, **params)
    assert len(decided) == len(records)
    for record, verdict in zip(records, decided, strict=True):
        if isinstance(verdict, Verdict):  # the failing Score the function returns, and nothing else in it
            assert evaluator.fn(record, **params) == Score(passed=verdict.passed, explanation=verdict.explanation)
        elif verdict is not None:
            assert evaluator.fn(record, **params) is verdict, record
    assert sum(v is True for v in decided) > 100  # it does decide the common case
    assert sum(isinstance(v, Verdict) for v in decided) > 100  # and the usual mismatch


@pytest.mark.parametrize("params", PARAMS[:2], ids=["normalize-all", "normalize-punctuation"])
async def test_exact_match_through_the_column_path_gives_the_message_paths_bytes(params) -> None:
    bound = [Registry.from_entry_points().resolve("builtin/exact-match").bind(params)]
    records = _records(500, seed=7)
    for trial, record in enumerate(records):
        record.provenance.trial = trial % 4
    holder, columns = TaskResult(), ResultColumns()
    await run_evaluators(records, bound, lambda _: EvalContext(), into=holder.results)
    await run_evaluators(records, bound, lambda _: EvalContext(), columns=columns)
    want = ResultColumns()
    append_results(want, holder.results)
    assert list(columns.data) == list(want.data)
    assert list(columns.outcomes) == list(want.outcomes) and list(columns.score_names) == list(want.score_names)
    assert [str(v) for v in columns.values] == [str(v) for v in want.values]
