"""Records as RAGAS samples (evalsi.adapters.ragas.samples): pure, so checked here without RAGAS's venv; the plugin
tests (test_ragas_plugin.py) check the same mapping end to end against samples RAGAS builds from the rows."""

from __future__ import annotations

import sys

import pytest

import evalsi.adapters.ragas as adapter
from evalsi.adapters.ragas.samples import MAX_CONTEXTS, sample_fields
from evalsi.records import make_record


def test_fields_map_as_the_rag_pack_reads_them() -> None:
    record = make_record(
        input={"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where?"}]},
        output={"messages": [{"role": "user", "content": "Where?"}, {"role": "assistant", "content": "Paris."}]},
        context=["Paris is in France.", {"json": {"doc": 2}}],
        reference={"json": ["Paris", "Paris, France"]},
        metadata={"reference_contexts": ["France's capital is Paris."]},
    )
    assert sample_fields(record) == {
        "user_input": "system: Be brief.\nuser: Where?",
        "response": "Paris.",
        "retrieved_contexts": ["Paris is in France.", '{"doc":2}'],
        "reference": "Any of these is correct:\n- Paris\n- Paris, France",
        "reference_contexts": ["France's capital is Paris."],
    }
    assert sample_fields(make_record(output="Paris.")) == {"response": "Paris."}  # absent fields left out


def test_bad_reference_contexts_and_too_many_contexts_are_refused() -> None:
    with pytest.raises(ValueError, match=r"metadata.reference_contexts must be a list of strings, got str"):
        sample_fields(make_record(output="x", metadata={"reference_contexts": "one"}))
    with pytest.raises(ValueError, match=rf"{MAX_CONTEXTS + 1} context items exceed the limit of {MAX_CONTEXTS}"):
        sample_fields(make_record(output="x", context=["c"] * (MAX_CONTEXTS + 1)))


def test_the_package_names_its_plugin_without_importing_ragas() -> None:
    assert (adapter.PLUGIN_DIR / "evalsi-plugin.yaml").is_file()
    assert adapter.UPSTREAM == "ragas==0.4.3" and "answer-relevancy" in adapter.METRICS
    assert "ragas" not in sys.modules
