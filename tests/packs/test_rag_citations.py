"""Citation accuracy: the accepted citation syntaxes, ids, supporting items, skips, through ``evalsi.evaluate``."""

from __future__ import annotations

from typing import Any

import pytest

import evalsi
from evalsi.packs.rag.citations import citations
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, OUTCOME_SKIPPED, EvaluationResult

CONTEXT = ["Paris is the capital of France.", "France is in Western Europe.", "Berlin is in Germany."]


@pytest.mark.parametrize(("text", "with_ids", "expected"), [
    ("Paris [1].", False, ["1"]),
    ("Paris [1][2] and [^3]", False, ["1", "2", "3"]),
    ("Paris [1, 3] and [2; 1]", False, ["1", "3", "2", "1"]),
    ("See [1-3] and [2–3]", False, ["1", "2", "3", "2", "3"]),
    ("See the [docs](https://x.y) and [1]", False, ["1"]),  # a markdown link is not a citation
    ("[doc-a] and [doc-b, 2]", True, ["doc-a", "doc-b", "2"]),
    ("[doc-a] and [note]", False, []),  # no ids in the context: bracketed words are prose
    ("[some words here]", True, []),
    ("arrays like a[0] or [ ] or []", False, ["0"]),
    ("日本の首都は東京です [2]。", False, ["2"]),
    ("", False, []),
])
def test_citation_syntaxes(text: str, with_ids: bool, expected: list[str]) -> None:
    assert citations(text, with_ids) == expected


def scores(rows: list[dict[str, Any]]) -> list[EvaluationResult]:
    found = evalsi.evaluate(rows, ["builtin/citation-accuracy"]).results
    order = {row["id"]: index for index, row in enumerate(rows)}
    return sorted(found, key=lambda r: order[r.record_id])


def values(result: EvaluationResult) -> dict[str, float]:
    return {s.name: s.number for s in result.scores}


def test_valid_precision_and_recall() -> None:
    rows = [
        {"id": "exact", "output": "Paris is the capital [1], in Western Europe [2].", "context": CONTEXT,
         "metadata": {"supporting": [1, 2]}},
        {"id": "dangling", "output": "Paris [1][7].", "context": CONTEXT, "metadata": {"supporting": [1, 2]}},
        {"id": "wrong", "output": "Paris [3].", "context": CONTEXT, "metadata": {"supporting": [1]}},
        {"id": "no-support-meta", "output": "Paris [1] [4]", "context": CONTEXT},
        {"id": "uncited", "output": "Paris.", "context": CONTEXT, "metadata": {"supporting": [1]}},
    ]
    got = scores(rows)
    assert [r.outcome for r in got] == [OUTCOME_SCORED] * 5
    assert values(got[0]) == {"valid": 1.0, "precision": 1.0, "recall": 1.0}
    assert values(got[1]) == {"valid": 0.5, "precision": 1.0, "recall": 0.5}
    assert "dangling: 7" in got[1].scores[0].explanation
    assert values(got[2]) == {"valid": 1.0, "precision": 0.0, "recall": 0.0}
    assert values(got[3]) == {"valid": 0.5}
    assert values(got[4]) == {"recall": 0.0}


def test_ids_from_json_items_and_metadata() -> None:
    json_context = [{"json": {"id": "doc-a", "text": CONTEXT[0]}}, {"json": {"id": "doc-b", "text": CONTEXT[1]}}]
    rows = [
        {"id": "json", "output": "Paris [doc-a], Europe [doc-b] [doc-z].", "context": json_context,
         "metadata": {"supporting": ["doc-a"]}},
        {"id": "meta", "output": "Paris [fr-1].", "context": CONTEXT[:2],
         "metadata": {"context_ids": ["fr-1", "fr-2"], "supporting": ["fr-1", 2]}},
        {"id": "bad-ids", "output": "Paris [1].", "context": CONTEXT, "metadata": {"context_ids": ["only-one"]}},
        {"id": "bad-support", "output": "Paris [1].", "context": CONTEXT, "metadata": {"supporting": [9]}},
    ]
    got = scores(rows)
    assert values(got[0]) == {"valid": pytest.approx(2 / 3), "precision": 0.5, "recall": 1.0}
    assert values(got[1]) == {"valid": 1.0, "precision": 1.0, "recall": 0.5}
    assert got[2].outcome == OUTCOME_ERROR and "metadata.context_ids must be a list of 3 strings" in got[2].reason
    assert got[3].outcome == OUTCOME_ERROR and "names 9, which is no context item (1..3 or an id)" in got[3].reason


def test_nothing_to_score_is_skipped_with_the_reason() -> None:
    got = scores([{"id": "a", "output": "Paris.", "context": CONTEXT},
                  {"id": "b", "output": "Paris [1]."}])
    assert [r.outcome for r in got] == [OUTCOME_SKIPPED, OUTCOME_SKIPPED]
    assert "no citations in the output" in got[0].reason and "missing context" in got[1].reason
