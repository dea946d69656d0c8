"""citation-accuracy reads a record's context ids only when a citation or a supporting item is a word: on generated
records (numbered and id citations, ranges, links, JSON and text context items, good and bad metadata.context_ids
and metadata.supporting) it returns what reading the ids first returns, numbers, explanations and errors alike."""

from __future__ import annotations

import random
from typing import Any

import pytest

from evalsi.errors import SkipRecord
from evalsi.evaluators import Registry
from evalsi.packs.rag.citations import citations, context_ids, resolve, supporting
from evalsi.records import content_text, make_record
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

_BODIES = ["1", "2", "3", "9", "0", "03", "\u0663", "1, 2", "1;3", "1-3", "2\u20134", "5-1", "doc-a", "doc-b",
           "doc-z", "^1", "^doc-a", "doc-a, 2", "some words", " 2 ", "", "1,", "-1", "1-200", "x"]
_SUPPORTING = [[1, 2], [2], 1, "doc-a", ["doc-b", 1], [-1], [1.5], [0], [], [True], [None], ["3"], [9]]


def _record(rng: random.Random, index: int) -> Record:
    count = rng.randint(0, 5)
    if rng.random() < 0.3:
        context: list[Any] = [{"json": {"id": rng.choice(["doc-a", "doc-b", "", "3", "-1"]), "text": "t"}}
                              if rng.random() < 0.7 else "plain" for _ in range(count)]
    else:
        context = [f"chunk {n}" for n in range(count)]
    pieces = ["word", f"[{rng.choice(_BODIES)}]", f"[{rng.choice(_BODIES)}](https://x.y)", "[", "]"]
    text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
    metadata: dict[str, Any] = {}
    if rng.random() < 0.5:
        metadata["supporting"] = rng.choice(_SUPPORTING)
    if rng.random() < 0.15:
        metadata["context_ids"] = rng.choice([["doc-a"] * count, ["a", "b"], [f"d{n}" for n in range(count)], "x"])
    output: Any = text if rng.random() < 0.9 else {"json": {"answer": text}}
    return make_record(id=f"r{index}", output=output, context=context or None, metadata=metadata or None)


def _ids_first(record: Record) -> list[Score]:
    """The evaluation with the ids read before anything else."""
    ids = context_ids(record)
    tokens = citations(content_text(record.output), with_ids=any(ids))
    count = len(record.context)
    resolved = [resolve(token, count, ids) for token in tokens]
    cited = {index for index in resolved if index is not None}
    scores = []
    if tokens:
        dangling = [token for token, index in zip(tokens, resolved, strict=True) if index is None]
        valid = Score(name="valid", number=(len(tokens) - len(dangling)) / len(tokens),
                      explanation=f"{len(tokens) - len(dangling)} of {len(tokens)} citations point at a context item")
        if dangling:
            valid.explanation += f"; dangling: {', '.join(dict.fromkeys(dangling))}"
        scores.append(valid)
    needed = supporting(record, ids)
    if needed is not None:
        hit = cited & needed
        if cited:
            scores.append(Score(name="precision", number=len(hit) / len(cited),
                                explanation=f"{len(hit)} of {len(cited)} cited items are supporting"))
        if needed:
            scores.append(Score(name="recall", number=len(hit) / len(needed),
                                explanation=f"{len(hit)} of {len(needed)} supporting items cited"))
    if not scores:
        raise SkipRecord("no citations in the output and no metadata.supporting: nothing to score")
    return scores


def _outcome(evaluate: Any, record: Record) -> tuple[str, Any]:
    try:
        return "scored", evaluate(record)
    except (ValueError, SkipRecord) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("seed", range(3))
def test_citation_accuracy_equals_reading_the_ids_first(seed: int) -> None:
    function = Registry.from_entry_points().resolve("builtin/citation-accuracy").fn
    rng = random.Random(seed)
    kinds: dict[str, int] = {}
    for index in range(4000):
        record = _record(rng, index)
        got = _outcome(function, record)
        assert got == _outcome(_ids_first, record), record
        kinds[got[0]] = kinds.get(got[0], 0) + 1
    assert min(kinds.get(kind, 0) for kind in ("scored", "ValueError", "SkipRecord")) > 400, kinds
