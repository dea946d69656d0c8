"""Records and DeepEval test cases, one mapping both ways (pure: no DeepEval import).

A record's fields map as the rag pack reads them: ``input`` is the question, ``output`` the answer
(``actual_output``), ``reference`` the expected answer (``expected_output``) and each ``context`` item one retrieved
chunk (``retrieval_context``, and ``context`` too: DeepEval's hallucination metric reads that one). Contents are
their text (``evalsi.records.content_text``: a conversation's last assistant message, JSON canonically).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.records import content_text, has_content
from evalsi.v1alpha1.record_pb2 import Record


def case_fields(record: Record) -> dict[str, Any]:
    """The keyword arguments of the ``LLMTestCase`` that stands for ``record``."""
    fields: dict[str, Any] = {"input": content_text(record.input), "actual_output": content_text(record.output)}
    if has_content(record, "reference"):
        fields["expected_output"] = content_text(record.reference)
    if record.context:
        chunks = [content_text(chunk) for chunk in record.context]
        fields["retrieval_context"] = chunks
        fields["context"] = list(chunks)
    return fields


def case_row(*, input: str, actual_output: str | None, expected_output: str | None = None,
             retrieval_context: Sequence[Any] | None = None, context: Sequence[str] | None = None,
             name: str | None = None, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record row (as ``evalsi.evaluate`` takes rows) of a DeepEval test case's fields: the mapping above,
    reversed. Retrieval context wins over context when a case has both; absent fields stay absent, so an
    evaluator that needs one skips the record rather than grading an empty string."""
    row: dict[str, Any] = {"input": input}
    if name:
        row["id"] = name
    if actual_output is not None:
        row["output"] = actual_output
    if expected_output is not None:
        row["reference"] = expected_output
    chunks = retrieval_context if retrieval_context else context
    if chunks:
        row["context"] = [_chunk_text(chunk) for chunk in chunks]
    if metadata:
        row["metadata"] = dict(metadata)
    return row


def _chunk_text(chunk: Any) -> str:
    # DeepEval 4 allows a retrieved chunk to be a RetrievedContextData (a context and its source) besides a string;
    # its own serializer writes it as DeepEval's prompts show it ("source: context").
    return chunk if isinstance(chunk, str) else str(chunk.model_dump())
