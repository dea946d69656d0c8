"""Cassettes: one trial's model and tool exchanges, as JSON lines, and reading them back for replay.

A cassette is written when a trial ends (whatever the reason) and holds, in order:

- ``{"type": "header", "version": 1, "task": {...}, "trial", "run_id", "started_at", "tools": [...],
  "model": {"provider", "model"}}``: enough to rebuild the trial's Record with no other input;
- ``{"type": "model", "step", "request", "answer", "start_s", "duration_s"}``: one model call; ``request`` is
  the provider-neutral request (model, messages, tools) that replay must reproduce exactly;
- ``{"type": "tool", "step", "call_id", "name", "arguments", "call_index", "outcome", "start_s",
  "duration_s"}``: one tool call (its result, whether mocked, which fault was injected);
- ``{"type": "end", "stop_reason", "error", "elapsed_s"}``: how the trial ended.

Times are seconds from ``started_at``, so a replayed trial carries the recorded timings and its Record is the
recorded one. Replay checks every request it makes against the recording; the first that differs is a
``CassetteMismatch`` naming the file, the step and the first differing field.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError

CASSETTE_VERSION = 1


class CassetteMismatch(BadInputError):
    """The replayed trial asked for something the recording does not have."""


@dataclass
class Cassette:
    """The entries of one trial, in order; ``path`` names it in errors."""

    header: dict[str, Any]
    entries: list[dict[str, Any]]
    path: str = "cassette"

    def write(self, path: str | Path) -> None:
        """Write atomically, so a reader never sees half a cassette."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for entry in (self.header, *self.entries):
                # Keys in their own order: a tool's value is replayed as the text the model saw, which follows it.
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
        os.replace(tmp, target)

    @property
    def end(self) -> Mapping[str, Any] | None:
        return self.entries[-1] if self.entries and self.entries[-1].get("type") == "end" else None


def read_cassette(path: str | Path) -> Cassette:
    source = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInputError(f"{source}: cannot read the cassette: {exc.strerror or exc}") from None
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{source}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or entry.get("type") not in ("header", "model", "tool", "end"):
            raise BadInputError(f"{source}:{number}: expected an object with type header, model, tool or end")
        entries.append(entry)
    if not entries or entries[0]["type"] != "header":
        raise BadInputError(f"{source}:1: a cassette starts with its header line")
    header = entries[0]
    if header.get("version") != CASSETTE_VERSION:
        raise BadInputError(f"{source}:1: cassette version {header.get('version')!r}; this harness reads "
                            f"version {CASSETTE_VERSION}")
    for key in ("task", "trial", "started_at", "tools"):
        if key not in header:
            raise BadInputError(f"{source}:1: the header has no {key!r}")
    return Cassette(header=header, entries=entries[1:], path=source)


def cassette_name(task_id: str, trial: int) -> str:
    """The file name of a trial's cassette in a cassette directory."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in task_id)
    return f"{safe}.trial-{trial}.jsonl"


def first_difference(recorded: Any, now: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, as ``path: recorded X, now Y``; None when equal."""
    if isinstance(recorded, Mapping) and isinstance(now, Mapping):
        for key in sorted(set(recorded) | set(now)):
            where = f"{path}.{key}" if path else str(key)
            if key not in recorded:
                return f"{where}: not recorded, now {_short(now[key])}"
            if key not in now:
                return f"{where}: recorded {_short(recorded[key])}, now absent"
            found = first_difference(recorded[key], now[key], where)
            if found:
                return found
        return None
    if isinstance(recorded, Sequence) and isinstance(now, Sequence) and not isinstance(recorded, str | bytes) \
            and not isinstance(now, str | bytes):
        for i, (a, b) in enumerate(zip(recorded, now, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(now):
            return f"{path}: recorded {len(recorded)} items, now {len(now)}"
        return None
    if recorded != now:
        return f"{path or 'value'}: recorded {_short(recorded)}, now {_short(now)}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."
