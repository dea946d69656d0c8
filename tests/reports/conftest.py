"""Saved results for the report tests: the quickstart data graded embedded (baseline) and its improved outputs
(candidate), made once per session as a user makes them (``evalsi.evaluate`` and ``save``, as ``evalsi eval
--output`` does)."""

from __future__ import annotations

from pathlib import Path

import pytest

import evalsi

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QA = EXAMPLES / "quickstart" / "qa.jsonl"
QA_IMPROVED = EXAMPLES / "quickstart" / "qa_improved.jsonl"
EVALUATORS = ["exact-match", "fuzzy-match"]


@pytest.fixture(scope="session")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``baseline`` (qa.jsonl) and ``candidate`` (qa_improved.jsonl) result documents."""
    out = tmp_path_factory.mktemp("reports")
    paths = {}
    for name, data in (("baseline", QA), ("candidate", QA_IMPROVED)):
        with evalsi.evaluate(str(data), EVALUATORS, name=name) as results:
            paths[name] = results.save(out / f"{name}.json")
    return paths
