"""Tasks: what one trial asks of the agent. One text, or a JSONL file of them.

A task line has the record conventions (DESIGN.md): ``id``, ``input`` (a string, or ``{"messages": [...]}`` of
``{role, content}`` for a conversation so far), ``reference`` and ``metadata``. A line without ``id`` gets a
stable one (a hash of its content), so reruns pair up.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.records import canonical_json

_TASK_KEYS = ("id", "input", "reference", "metadata")


@dataclass(frozen=True)
class Task:
    id: str
    input: Any  # a string, or {"messages": [...]}
    reference: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation the agent starts from."""
        if isinstance(self.input, str):
            return [{"role": "user", "content": self.input}]
        return [{"role": m["role"], "content": m["content"]} for m in self.input["messages"]]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "input": self.input, "reference": self.reference, "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Task:
        if not isinstance(doc, Mapping):
            raise BadInputError(f"{where}: a task is a JSON object with id, input, reference, metadata")
        unknown = [key for key in doc if key not in _TASK_KEYS]
        if unknown:
            raise BadInputError(f"{where}: unknown key {unknown[0]!r}; a task has {', '.join(_TASK_KEYS)}")
        task_input = doc.get("input")
        if not _valid_input(task_input):
            raise BadInputError(f"{where}: input: expected a string or {{\"messages\": [{{role, content}}, ...]}} "
                                f"ending with a user message, got {task_input!r}")
        metadata = doc.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise BadInputError(f"{where}: metadata: expected an object, got {type(metadata).__name__}")
        task_id = doc.get("id")
        if task_id is None:
            task_id = "t-" + hashlib.sha256(canonical_json(dict(doc)).encode()).hexdigest()[:16]
        if not isinstance(task_id, str | int) or isinstance(task_id, bool) or not str(task_id):
            raise BadInputError(f"{where}: id: expected a non-empty string, got {task_id!r}")
        return cls(id=str(task_id), input=task_input, reference=doc.get("reference"), metadata=dict(metadata))


def _valid_input(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value)
    if not isinstance(value, Mapping) or set(value) != {"messages"} or not isinstance(value["messages"], list):
        return False
    messages = value["messages"]
    return bool(messages) and all(
        isinstance(m, Mapping) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
        for m in messages
    ) and messages[-1]["role"] == "user"


def load_tasks(path: str | Path) -> list[Task]:
    """Every task of a JSONL file; errors name the file and line. Ids must be unique."""
    source = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInputError(f"{source}: cannot read the tasks: {exc.strerror or exc}") from None
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{source}:{number}: not JSON ({exc.msg})") from None
        task = Task.from_dict(doc, f"{source}:{number}")
        if task.id in seen:
            raise BadInputError(f"{source}:{number}: id {task.id!r} repeats line {seen[task.id]}; ids are unique "
                                "(use --trials for repeats)")
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise BadInputError(f"{source}: no tasks (one JSON object per line)")
    return tasks
