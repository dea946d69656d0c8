"""Records as RAGAS samples, and which record fields each adapted metric needs: pure, importable without RAGAS.

The mapping is the rag pack's (``evalsi.packs.rag``): the input as the question (a conversation as ``role:
content`` lines), the output's text as the response, each context item's text as one retrieved context, the
reference as RAGAS's reference (a JSON list of references reads "any of these"), and ``metadata.reference_contexts``
(a list of strings) as the reference contexts.
"""

from __future__ import annotations

from typing import Any

from evalsi.packs.judge.evaluators import render_content, render_reference
from evalsi.records import content_text, from_value, has_content
from evalsi.v1alpha1.record_pb2 import Record

# The release the adapter is tested against (tests/adapters/test_ragas_*.py); the plugin's venv pins it.
UPSTREAM = "ragas==0.4.3"
# A record's contexts, and its reference contexts, handed to RAGAS: each is one judged passage at least.
MAX_CONTEXTS = 100
REFERENCE_CONTEXTS = "reference_contexts"

# Adapted metric -> the record fields it needs (besides the judge), from RAGAS's required columns.
METRICS: dict[str, tuple[str, ...]] = {
    "faithfulness": ("input", "output", "context"),
    "context-precision": ("input", "context", "reference"),
    "context-recall": ("input", "context", "reference"),
    "context-entity-recall": ("context", "reference"),
    "factual-correctness": ("output", "reference"),
    "answer-correctness": ("input", "output", "reference"),
    "answer-relevancy": ("input", "output"),
    "noise-sensitivity": ("input", "output", "context", "reference"),
}


def _reference_contexts(record: Record) -> list[str] | None:
    if REFERENCE_CONTEXTS not in record.metadata:
        return None
    value = from_value(record.metadata[REFERENCE_CONTEXTS])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"metadata.{REFERENCE_CONTEXTS} must be a list of strings, got {type(value).__name__}")
    if len(value) > MAX_CONTEXTS:
        raise ValueError(f"metadata.{REFERENCE_CONTEXTS}: {len(value)} items exceed the limit of {MAX_CONTEXTS}")
    return value


def sample_fields(record: Record) -> dict[str, Any]:
    """Keyword arguments for RAGAS's ``SingleTurnSample``: the fields the record has, absent ones left out."""
    if len(record.context) > MAX_CONTEXTS:
        raise ValueError(f"{len(record.context)} context items exceed the limit of {MAX_CONTEXTS}")
    fields: dict[str, Any] = {}
    if has_content(record, "input"):
        fields["user_input"] = render_content(record.input, conversation=True)
    if has_content(record, "output"):
        fields["response"] = render_content(record.output)
    if has_content(record, "context"):
        fields["retrieved_contexts"] = [content_text(item) for item in record.context]
    if has_content(record, "reference"):
        fields["reference"] = render_reference(record)
    reference_contexts = _reference_contexts(record)
    if reference_contexts is not None:
        fields["reference_contexts"] = reference_contexts
    return fields
