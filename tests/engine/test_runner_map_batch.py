"""A dataset evaluator's ``map_batch`` (its mapper over text columns): where it answers, its values are reduced
as the mapper's would be; where it answers None, fails, or answers a list of the wrong length, the mapper decides
(and may skip the record); it is called a chunk at a time; it is refused on an evaluator without a mapper or
requiring more than text fields. The figure, its interval and the counts are the mapper's either way."""

from __future__ import annotations

from typing import Any

import pytest

import evalsi
from evalsi.datasets import records_from_rows
from evalsi.errors import SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators.runner import _batch_mapped
from evalsi.v1alpha1.record_pb2 import Record

ROWS = [{"id": f"r{i}", "output": "x" * (i % 9), "reference": "y" * (i % 4)} for i in range(300)]


def _mapper(record: Record) -> int:
    if not record.output.text:
        raise SkipRecord("an empty output")
    return len(record.output.text) + len(record.reference.text)


def _mean(values: list[int]) -> float:
    return sum(values) / len(values)


def _metric(name: str, map_batch: Any) -> Any:
    return evaluator(name, scope="dataset", requires=["output", "reference"], mapper=_mapper, map_batch=map_batch,
                     outputs=[Output("mean", "number")])(_mean)


def _summary(ev: Any) -> tuple[float, float, float, int, int]:
    metric = evalsi.evaluate(ROWS, [ev], seed=5).metric(ev.name.split("/")[1])
    return metric.mean, metric.ci.low, metric.ci.high, metric.n, metric.skipped


def _every_other(texts: dict[str, list[str]]) -> list[int | None]:
    return [None if index % 2 or not out else len(out) + len(ref)
            for index, (out, ref) in enumerate(zip(texts["output"], texts["reference"], strict=True))]


def test_batch_values_and_the_mappers_fallbacks() -> None:
    reference = _summary(_metric("t/mapper-only", None))
    assert _summary(_metric("t/half-batched", _every_other)) == reference
    assert reference[3] == 300 - 34 and reference[4] == 34  # the empty outputs: skipped by the mapper


def test_a_chunk_at_a_time() -> None:
    calls: list[int] = []

    def counted(texts: dict[str, list[str]]) -> list[int | None]:
        calls.append(len(texts["output"]))
        return _every_other(texts)

    records = list(records_from_rows(ROWS))
    values = _batch_mapped(_metric("t/chunks", counted).bind({}), records, 64)
    assert calls == [64, 64, 64, 64, 44]
    assert values == [None if i % 2 or not r.output.text else len(r.output.text) + len(r.reference.text)
                      for i, r in enumerate(records)]


def test_a_failing_or_misshapen_batch_leaves_every_record_to_the_mapper() -> None:
    def raises(texts: dict[str, list[str]]) -> list[int]:
        raise RuntimeError("a bug in the batch form")

    def short(texts: dict[str, list[str]]) -> list[int]:
        return [1] * (len(texts["output"]) - 1)

    reference = _summary(_metric("t/mapper-only-2", None))
    assert _summary(_metric("t/raises", raises)) == reference
    assert _summary(_metric("t/short", short)) == reference


def test_the_batch_values_are_what_is_reduced() -> None:
    """Not a fallback in disguise: a batch that answers 0 for every record gives a mean of 0."""
    ev = _metric("t/zeros", lambda texts: [0] * len(texts["output"]))
    assert evalsi.evaluate(ROWS, [ev]).metric("zeros").mean == 0.0


@pytest.mark.parametrize(("scope", "requires", "mapper"), [
    ("record", ["output"], None), ("dataset", ["output", "metadata.x"], _mapper)])
def test_a_map_batch_needs_a_mapper_over_text_fields(scope: str, requires: list[str], mapper: Any) -> None:
    with pytest.raises(ValueError, match="a map_batch needs a dataset-scope mapper requiring only input, output, "
                                         "reference"):
        evaluator("t/bad", scope=scope, requires=requires, mapper=mapper,
                  map_batch=lambda texts: [])(lambda values: 0.0)
