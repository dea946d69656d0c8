"""Reading the rag judges' structured answers: a JSON object holding a list of items (claims, verdicts).

Like the judge pack's parser it takes the last such object wherever it sits (code fence, prose around it); an
answer without one, with an item missing its field, or with a verdict that is neither yes nor no, is unparseable:
``UnparseableAnswer`` makes the evaluation an evaluator error, never a score.
"""

from __future__ import annotations

from typing import Any

from evalsi.packs.judge.answers import Answer, UnparseableAnswer, find_json_objects

MAX_ITEMS = 100  # claims or statements read from one answer; a longer list is refused as unreadable
ITEM_CHARS = 500  # each claim as kept (metadata, the next prompt)
_YES = {"1", "yes", "true", "supported", "relevant", "attributed", "y"}
_NO = {"0", "no", "false", "unsupported", "not supported", "irrelevant", "not relevant", "n"}
ANSWER_VERDICTS = ("yes", "no", "idk")


def _unparseable(raw: str, error: str) -> UnparseableAnswer:
    return UnparseableAnswer(Answer(raw, None, error=error))


def item_list(raw: str, key: str) -> list[Any]:
    """The list under ``key`` in the last JSON object of ``raw`` that has it."""
    found = [obj for obj in find_json_objects(raw) if isinstance(obj.get(key), list)]
    if not found:
        raise _unparseable(raw, f"no JSON object with a {key!r} list")
    items = found[-1][key]
    if len(items) > MAX_ITEMS:
        raise _unparseable(raw, f"{len(items)} {key} exceed the limit of {MAX_ITEMS}")
    return items


def claims(raw: str) -> list[str]:
    """``{"claims": ["...", ...]}``: the non-blank claims, each cut to ITEM_CHARS."""
    items = item_list(raw, "claims")
    if not all(isinstance(item, str) for item in items):
        raise _unparseable(raw, "every claim must be a string")
    return [item.strip()[:ITEM_CHARS] for item in items if item.strip()]


def binary(value: Any) -> int | None:
    """1 for a yes, 0 for a no (1/0, true/false, "yes"/"no" and their synonyms), None otherwise."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str):
        text = value.strip().strip(".\"'").lower()
        return 1 if text in _YES else 0 if text in _NO else None
    return None


def verdicts(raw: str, key: str, field: str, expected: int | None = None) -> list[tuple[str, int, str]]:
    """``{key: [{"statement"/"claim": ..., "reason": ..., field: 1|0}, ...]}``: (text, verdict, reason) per item;
    with ``expected``, exactly that many items (one per claim asked about)."""
    items = item_list(raw, key)
    if expected is not None and len(items) != expected:
        raise _unparseable(raw, f"{len(items)} {key} for {expected} claims")
    read = []
    for index, item in enumerate(items):
        value = binary(item.get(field)) if isinstance(item, dict) else None
        if value is None:
            raise _unparseable(raw, f"{key}[{index}] has no yes/no {field!r}")
        text = str(item.get("statement", item.get("claim", "")))[:ITEM_CHARS]
        read.append((text, value, str(item.get("reason", ""))[:ITEM_CHARS]))
    return read


def relevance_verdicts(raw: str) -> list[tuple[str, str, str]]:
    """``{"statements": [{"statement": ..., "verdict": "yes"|"no"|"idk", "reason": ...}]}``."""
    read = []
    for index, item in enumerate(item_list(raw, "statements")):
        verdict = str(item.get("verdict", "")).strip().lower() if isinstance(item, dict) else ""
        if verdict not in ANSWER_VERDICTS:
            raise _unparseable(raw, f"statements[{index}] verdict must be one of {', '.join(ANSWER_VERDICTS)}")
        read.append((str(item.get("statement", ""))[:ITEM_CHARS], verdict, str(item.get("reason", ""))[:ITEM_CHARS]))
    return read
