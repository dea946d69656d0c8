"""What an MLflow scorer is given, as one record row (the record-file convention of docs/datasets.md), pure.

- ``input`` is MLflow's ``inputs``: a string as it is; a mapping holding one string (``{"question": ...}``) that
  string; chat messages (``{"messages": [...]}``) those messages; anything else its JSON.
- ``output`` is MLflow's ``outputs``: a string as text; chat messages (``{"messages": [...]}`` or a list of messages)
  those messages; an OpenAI chat completion (``{"choices": [{"message": ...}]}``, what a traced app often returns)
  its first choice's text; anything else its JSON. No outputs, no output (evaluators that need one skip).
- ``reference`` is ``expectations["expected_response"]``; failing that ``expected_facts``, the facts one per line as
  one text (every fact is expected, so they are not a JSON list, which would mean "any of these").
- ``context`` is the documents the trace's retrieval spans (span type ``RETRIEVER``) returned, in order: each
  document's ``page_content`` (or ``content``), or the document itself when it is a string.
- ``id`` is the trace's id (``mlflow`` without a trace); ``metadata`` holds ``mlflow.trace_id`` and the whole
  ``expectations`` as ``mlflow.expectations``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NO_TRACE_ID = "mlflow"
# Bounds on what a trace contributes: the retrieval spans read and the documents kept.
MAX_RETRIEVAL_SPANS = 64
MAX_CONTEXT_ITEMS = 512


def mlflow_row(
    inputs: Any = None,
    outputs: Any = None,
    expectations: Mapping[str, Any] | None = None,
    contexts: Sequence[str] = (),
    trace_id: str = "",
) -> dict[str, Any]:
    """The record row of one scorer call (module docstring)."""
    row: dict[str, Any] = {"id": trace_id or NO_TRACE_ID}
    if inputs is not None:
        row["input"] = _input(inputs)
    output = _output(outputs)
    if output is not None:
        row["output"] = output
    reference = _reference(expectations or {})
    if reference is not None:
        row["reference"] = reference
    if contexts:
        row["context"] = list(contexts)
    metadata: dict[str, Any] = {}
    if trace_id:
        metadata["mlflow.trace_id"] = trace_id
    if expectations:
        metadata["mlflow.expectations"] = _plain(expectations)
    if metadata:
        row["metadata"] = metadata
    return row


def _is_messages(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(m, Mapping) and "role" in m for m in value))


def _messages(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"messages": [_plain(m) for m in messages]}


def _input(inputs: Any) -> Any:
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping):
        if _is_messages(inputs.get("messages")):
            return _messages(inputs["messages"])
        if len(inputs) == 1:
            (only,) = inputs.values()
            if isinstance(only, str):
                return only
    if _is_messages(inputs):
        return _messages(inputs)
    return {"json": _plain(inputs)}


def _output(outputs: Any) -> Any:
    if outputs is None:
        return None
    if isinstance(outputs, str):
        return outputs
    if _is_messages(outputs):
        return _messages(outputs)
    if isinstance(outputs, Mapping):
        if _is_messages(outputs.get("messages")):
            return _messages(outputs["messages"])
        text = _completion_text(outputs)
        if text is not None:
            return text
    return {"json": _plain(outputs)}


def _completion_text(outputs: Mapping[str, Any]) -> str | None:
    """The first choice's text of an OpenAI chat completion, or ``None`` when ``outputs`` is not one."""
    choices = outputs.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    if isinstance(message, Mapping) and isinstance(message.get("content"), str):
        return str(message["content"])
    return None


def _reference(expectations: Mapping[str, Any]) -> Any:
    response = expectations.get("expected_response")
    if response is not None:
        return response if isinstance(response, str) else {"json": _plain(response)}
    facts = expectations.get("expected_facts")
    if isinstance(facts, list) and facts:
        return "\n".join(str(fact) for fact in facts)
    return None


def retrieved_documents(outputs: Iterable[Any]) -> list[str]:
    """The texts of the documents retrieval spans returned, in order (each span's outputs, as MLflow logs them: a
    list of documents, or its JSON), at most ``MAX_CONTEXT_ITEMS``."""
    texts: list[str] = []
    for span_outputs in outputs:
        documents = span_outputs
        if isinstance(documents, str):
            try:
                documents = json.loads(documents)
            except json.JSONDecodeError:
                documents = [documents]
        for document in documents if isinstance(documents, list) else [documents]:
            text = _document_text(document)
            if text:
                texts.append(text)
            if len(texts) == MAX_CONTEXT_ITEMS:
                return texts
    return texts


def _document_text(document: Any) -> str:
    if isinstance(document, str):
        return document
    if isinstance(document, Mapping):
        for key in ("page_content", "content"):
            if isinstance(document.get(key), str):
                return str(document[key])
    return ""


def _plain(value: Any) -> Any:
    """A JSON value: what an app's inputs or outputs hold that JSON cannot (a date, an object) as its string."""
    return json.loads(json.dumps(value, default=str))
