"""Field mapping: which part of a row becomes which part of a record.

By default a row's ``id``, ``input``, ``output``, ``reference``, ``context``, ``metadata``, ``usage``,
``trajectory`` and ``trial`` keys become those record fields, and every other top-level key lands in
``metadata`` under its own name. A mapping (``--map input=question --map reference=answers.0``) names
a target, one of those fields or ``metadata.<key>`` or ``usage.<field>``, and a dotted source path in
the row, where a numeric part indexes a list. Mapped sources are consumed: what a mapping takes does
not also land in metadata, while the rest of a partly mapped value does (mapping ``answer.text``
leaves ``answer.start`` in metadata under ``answer``). A top-level ``None`` counts as missing.

A tabular prediction (``Content.row``) is built from columns by the ``output.row.`` targets:
``output.row.prediction=<column>``, ``output.row.probabilities.<class>=<column>`` (a number, or a string that
parses as one: CSV cells are strings) and ``output.row.features.<name>=<column>``, or ``output.row.features=*``
for every column no other mapping or record field takes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.errors import BadInputError

RECORD_TARGETS = ("id", "input", "output", "reference", "context", "metadata", "usage", "trajectory", "trial")
"""Row keys that become record fields by default, and the whole-field mapping targets."""

USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "cost_usd",
    "latency_s",
    "latency_ms",
    "ttft_s",
    "ttft_ms",
)
"""The keys a ``usage`` object may hold, and the ``usage.<field>`` mapping targets."""

ROW_TARGET = "output.row."
ALL_COLUMNS = "*"
TARGETS_HELP = (
    f"{', '.join(RECORD_TARGETS)}, metadata.<key>, usage.<field> (<field>: {', '.join(USAGE_FIELDS)}), "
    "output.row.prediction, output.row.probabilities.<class>, output.row.features.<name>, output.row.features=*"
)

_TARGET_SET = frozenset(RECORD_TARGETS)
_GONE = object()  # what remains of a value once all of it was mapped


@dataclass(frozen=True)
class MappingItem:
    """One ``target=source`` pair."""

    target: str
    source: str
    path: tuple[str, ...]
    kind: str  # "field", "metadata", "usage" or "row"
    key: str  # the record field, metadata key, usage field or row part (features.<name>, probabilities.<class>)

    def __str__(self) -> str:
        return f"{self.target}={self.source}"


@dataclass(frozen=True)
class FieldMapping:
    """A parsed mapping; the empty mapping applies the default conventions only."""

    items: tuple[MappingItem, ...] = ()
    _defaults: frozenset[str] = field(init=False, repr=False, compare=False)
    _rest_features: bool = field(init=False, repr=False, compare=False)  # output.row.features=*

    def __post_init__(self) -> None:
        mapped = {item.key for item in self.items if item.kind == "field"}
        if any(item.kind == "row" for item in self.items):
            mapped.add("output")
        object.__setattr__(self, "_defaults", _TARGET_SET - mapped)
        object.__setattr__(self, "_rest_features", any(_all_columns(item) for item in self.items))

    def __bool__(self) -> bool:
        return bool(self.items)

    def split(self, row: Mapping[str, Any], missing: set[int] | None = None) -> SplitRow:
        """The row's parts: record fields, mapped metadata, mapped usage, leftover keys for metadata.

        ``missing`` holds indexes of items not found in any row yet; found ones are discarded from it.
        Empty parts are ``None``.
        """
        if not self.items:
            return _split_default(row)
        fields: dict[str, Any] = {}
        metadata: dict[str, Any] | None = None
        usage: dict[str, Any] | None = None
        whole: set[str] = set()
        partial: dict[str, dict[Any, Any]] = {}  # top-level key -> trie of the parts taken
        tabular: dict[str, Any] = {}
        for index, item in enumerate(self.items):
            if _all_columns(item):  # the leftover columns, gathered below
                if missing:
                    missing.discard(index)
                continue
            found, value, top, rest = _resolve(row, item)
            if not found:
                continue
            if missing:
                missing.discard(index)
            if rest:
                _take(partial.setdefault(top, {}), rest)
            else:
                whole.add(top)
            if value is None:
                continue
            if item.kind == "field":
                fields[item.key] = value
            elif item.kind == "row":
                _row_part(tabular, item, value)
            elif item.kind == "metadata":
                metadata = metadata or {}
                metadata[item.key] = value
            else:
                usage = usage or {}
                usage[item.key] = value
        extras: dict[str, Any] | None = None
        defaults = self._defaults
        for key, value in row.items():
            if key in whole:
                continue
            if key in partial:
                value = _without(value, partial[key])
                if value is _GONE:
                    continue
            if value is None:
                continue
            if key in defaults:
                fields[key] = value
            else:
                if extras is None:
                    extras = {}
                extras[key] = value
        if self._rest_features and extras:
            tabular.setdefault("features", {}).update(extras)
            extras = None
        if tabular:
            fields["output"] = {"row": tabular}
        return fields, metadata, usage, extras


def _all_columns(item: MappingItem) -> bool:
    return item.kind == "row" and item.source == ALL_COLUMNS


def _row_part(tabular: dict[str, Any], item: MappingItem, value: Any) -> None:
    """Put a mapped column's value in its place in the row being built."""
    part, _, name = item.key.partition(".")
    if part == "prediction":
        tabular["prediction"] = value
        return
    if part == "probabilities" and type(value) is str:
        # Not a number: left as it is, and the row's conversion names the class and the value it refuses.
        with contextlib.suppress(ValueError):
            value = float(value)
    tabular.setdefault(part, {})[name] = value


SplitRow = tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]
"""``(fields, mapped metadata, mapped usage, leftover keys)``."""


def _split_default(row: Mapping[str, Any]) -> SplitRow:
    fields: dict[str, Any] = {}
    extras: dict[str, Any] | None = None
    for key, value in row.items():
        if value is None:
            continue
        if key in _TARGET_SET:
            fields[key] = value
        else:
            if extras is None:
                extras = {}
            extras[key] = value
    return fields, None, None, extras


def parse_mapping(spec: Mapping[str, str] | Sequence[str] | FieldMapping | None) -> FieldMapping:
    """A :class:`FieldMapping` from ``{"target": "source"}`` or ``["target=source", ...]``."""
    if spec is None:
        return FieldMapping()
    if isinstance(spec, FieldMapping):
        return spec
    pairs: list[tuple[str, Any, str]] = []
    if isinstance(spec, Mapping):
        for target, source in spec.items():
            pairs.append((str(target), source, f"{target}={source}"))
    else:
        entries: Iterable[Any] = [spec] if isinstance(spec, str) else spec
        for entry in entries:
            if not isinstance(entry, str) or "=" not in entry:
                raise BadInputError(
                    f"--map {entry!r}: expected target=source (e.g. input=question); "
                    f"accepted targets: {TARGETS_HELP}"
                )
            target, source = entry.split("=", 1)
            pairs.append((target, source, entry))
    items: list[MappingItem] = []
    seen: dict[str, str] = {}
    for target, source, text in pairs:
        item = _item(target.strip(), source, text)
        if item.target in seen:
            raise BadInputError(
                f"--map {text!r}: target {item.target!r} is already mapped by --map {seen[item.target]!r}"
            )
        seen[item.target] = text
        items.append(item)
    if "output" in seen and any(item.kind == "row" for item in items):
        raise BadInputError(f"--map {seen['output']!r}: output is built from the output.row.* mappings; "
                            "map the whole output or its row parts, not both")
    return FieldMapping(tuple(items))


def _item(target: str, source: Any, text: str) -> MappingItem:
    if target in _TARGET_SET:
        kind, key = "field", target
    elif target.startswith("metadata.") and len(target) > len("metadata."):
        kind, key = "metadata", target[len("metadata.") :]
    elif target.startswith("usage.") and target[len("usage.") :] in USAGE_FIELDS:
        kind, key = "usage", target[len("usage.") :]
    elif target.startswith(ROW_TARGET) and _row_target(target[len(ROW_TARGET) :], source):
        kind, key = "row", target[len(ROW_TARGET) :]
    else:
        raise BadInputError(f"--map {text!r}: unknown target {target!r}; accepted targets: {TARGETS_HELP}")
    if not isinstance(source, str) or not source.strip():
        raise BadInputError(
            f"--map {text!r}: expected a source field after '=', a dotted path such as answer.text or "
            f"answers.0; accepted targets: {TARGETS_HELP}"
        )
    source = source.strip()
    path = tuple(source.split("."))
    if not all(path):
        raise BadInputError(
            f"--map {text!r}: {source!r} is not a dotted path (an empty part); e.g. answer.text or answers.0"
        )
    return MappingItem(target=target, source=source, path=path, kind=kind, key=key)


def _row_target(part: str, source: Any) -> bool:
    """``prediction``, ``probabilities.<class>``, ``features.<name>``, or ``features`` from ``*``."""
    head, dot, name = part.partition(".")
    if head == "prediction":
        return not dot
    if head == "features" and not dot:
        return isinstance(source, str) and source.strip() == ALL_COLUMNS
    return head in ("features", "probabilities") and bool(name)


def _resolve(row: Mapping[str, Any], item: MappingItem) -> tuple[bool, Any, str, tuple[Any, ...]]:
    """``(found, value, top-level key, rest of the path)``; a key spelled with dots wins over a path.

    The rest holds the keys and list indexes (ints, negative ones resolved) actually followed.
    """
    source = item.source
    if source in row:
        return True, row[source], source, ()
    path = item.path
    if len(path) == 1 or path[0] not in row:
        return False, None, "", ()
    value = row[path[0]]
    followed: list[Any] = []
    for part in path[1:]:
        if type(value) is dict or isinstance(value, Mapping):
            if part not in value:
                return False, None, "", ()
            value = value[part]
            followed.append(part)
        elif isinstance(value, list | tuple):
            index = _index(part, len(value))
            if index is None:
                return False, None, "", ()
            value = value[index]
            followed.append(index)
        else:
            return False, None, "", ()
    return True, value, path[0], tuple(followed)


def resolve_path(row: Mapping[str, Any], source: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted source path in a row, as a mapping reads it."""
    item = MappingItem(target="", source=source, path=tuple(source.split(".")), kind="", key="")
    found, value, _, _ = _resolve(row, item)
    return found, value


def _index(part: str, length: int) -> int | None:
    try:
        index = int(part)
    except ValueError:
        return None
    if index < 0:
        index += length
    return index if 0 <= index < length else None


def _take(trie: dict[Any, Any], path: tuple[Any, ...]) -> None:
    """Record ``path`` as taken in ``trie`` (nested dicts; ``True`` marks a part taken whole)."""
    node = trie
    for part in path[:-1]:
        child = node.get(part)
        if child is True:
            return
        if child is None:
            child = node[part] = {}
        node = child
    node[path[-1]] = True


def _without(value: Any, taken: dict[Any, Any] | bool) -> Any:
    """What is left of ``value`` once the parts in ``taken`` are gone; emptied containers go too."""
    if taken is True:
        return _GONE
    if taken is False:  # nothing taken: the value stays whole
        return value
    if type(value) is dict or isinstance(value, Mapping):
        out = dict(value)
        for key, sub in taken.items():
            if key in out:
                rest = _without(out[key], sub)
                if rest is _GONE:
                    del out[key]
                else:
                    out[key] = rest
        return out or _GONE
    if isinstance(value, list | tuple):
        kept: list[Any] = []
        for index, inner in enumerate(value):
            sub = taken.get(index)
            if sub is not None:
                inner = _without(inner, sub)
                if inner is _GONE:
                    continue
            kept.append(inner)
        return kept or _GONE
    return value
