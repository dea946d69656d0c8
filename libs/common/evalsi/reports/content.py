"""The records a run graded, for a report's record table and for slicing by metadata.

A saved result holds per-record results, not the records: their input, output, reference and metadata are in the
dataset. So they are read from a data file (``--data``, mapped as the run mapped it), or from the file the run
names (``spec.dataset.path``) when that file is still here and still holds exactly the records the run graded:
its ``dataset_version`` (the sha256 of the records) must equal the manifest's. That check also means a result
document from elsewhere cannot make a report copy a local file into itself: only a file whose content the
document's author already knew matches its version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from google.protobuf import json_format

from evalsi.datasets import stream_dataset
from evalsi.v1alpha1.record_pb2 import Content, Record, StepType, Trajectory
from evalsi.v1alpha1.run_pb2 import Run

T = TypeVar("T")


def content_text(content: Content) -> str:
    """A record field as text: the text itself, a conversation as ``role: content`` lines (tool calls with their
    arguments), anything else as compact JSON."""
    kind = content.WhichOneof("kind")
    if kind is None:
        return ""
    if kind == "text":
        return content.text
    if kind == "messages":
        lines = []
        for message in content.messages.messages:
            lines.append(f"{message.role}: {message.content}")
            for call in message.tool_calls:
                arguments = json.dumps(json_format.MessageToDict(call.arguments), ensure_ascii=False)
                lines.append(f"  → {call.name}({arguments})")
        return "\n".join(lines)
    if kind == "json":
        return json.dumps(json_format.MessageToDict(content.json), ensure_ascii=False)
    return json.dumps(json_format.MessageToDict(getattr(content, kind)), ensure_ascii=False)


def run_dataset_file(run: Run) -> str:
    """The file the run read its records from, when it is one here: the manifest names it as the run resolved it
    (absolute for an embedded run), the spec as it was written (relative to the spec's directory)."""
    for candidate in (run.manifest.dataset, run.spec.dataset.path):
        if candidate and Path(candidate).expanduser().is_file():
            return candidate
    return ""


STEP_CHARS = 300  # of one step's input, output or tool result in a trajectory's text


def trajectory_text(trajectory: Trajectory) -> str:
    """An agent's steps, one a line: the step's type and name, a tool call's arguments and result or error, an
    LLM step's output; each part cut at ``STEP_CHARS``."""
    lines = []
    for number, step in enumerate(trajectory.steps, start=1):
        kind = StepType.Name(step.type).removeprefix("STEP_TYPE_").lower()
        line = f"{number}. {kind} {step.name or step.model}".rstrip()
        if step.HasField("tool_call"):
            call = step.tool_call
            arguments = json.dumps(json_format.MessageToDict(call.arguments), ensure_ascii=False)
            line += f" {call.name}({_cut(arguments)})"
            if call.error:
                line += f" → error: {_cut(call.error)}"
            elif call.HasField("result"):
                line += f" → {_cut(json.dumps(json_format.MessageToDict(call.result), ensure_ascii=False))}"
        elif step.HasField("output"):
            line += f": {_cut(content_text(step.output))}"
        if step.error:
            line += f" [error: {_cut(step.error)}]"
        lines.append(line)
    return "\n".join(lines)


def _cut(text: str) -> str:
    return text if len(text) <= STEP_CHARS else text[: STEP_CHARS - 1] + "…"


@dataclass(frozen=True)
class Joined(Generic[T]):
    """What was kept of the records whose ids were wanted, and a note when something did not line up."""

    by_id: dict[str, T]
    note: str


def join_records(
    run: Run,
    data: str | None,
    mapping: Sequence[str],
    keep: Callable[[Record], T],
    wanted: Collection[str] | None = None,
) -> Joined[T] | None:
    """``keep(record)`` for each record of the run's dataset whose id is in ``wanted`` (every id when None), read
    from ``data``, else from the run's own file (``run_dataset_file``) when its version is still the manifest's.
    None when neither is available. One pass over the file; only what ``keep`` returns is held."""
    explicit = data is not None
    source = data if explicit else run_dataset_file(run)
    if not source:
        return None
    field_mapping = list(mapping) or [f"{k}={v}" for k, v in sorted(run.spec.dataset.mapping.items())] or None
    stream = stream_dataset(source, mapping=field_mapping, limit=run.spec.dataset.limit or None)
    kept: dict[str, T] = {}
    for record in stream:
        if (wanted is None or record.id in wanted) and record.id not in kept:
            kept[record.id] = keep(record)
    version = run.manifest.dataset_version
    if version and stream.version != version:
        if not explicit:
            return None  # the run's file has changed since: its records are not the ones graded
        return Joined(kept, f"{source} is not the data this run graded (its version {stream.version[:12]} "
                                    f"is not the run's {version[:12]}); records are matched by id")
    return Joined(kept, "")
