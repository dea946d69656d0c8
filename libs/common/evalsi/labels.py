"""Labels on traces: OTLP resource attributes ``evalsi.label.<key>``, and ``key=value`` label filters (pure).

A trace's labels are its resources' ``evalsi.label.*`` attributes. An ingest credential's own labels (an API
key's ``labels``) are written onto every resource it exports, over what the resource says, so a key labelled
``app: checkout`` cannot send traces labelled otherwise (``stamp_resource_labels``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalsi.errors import BadInputError
from evalsi.limits import MAX_LABEL_KEY_CHARS, MAX_LABEL_VALUE_CHARS, MAX_LABELS, check_count

LABEL_ATTRIBUTE_PREFIX = "evalsi.label."


def resource_labels(attributes: Mapping[str, Any]) -> dict[str, str]:
    """The labels one resource carries (its decoded attributes), by key without the prefix; a label is a string
    (an attribute of another type under the prefix is no label, at the gate as in the stores)."""
    return {key.removeprefix(LABEL_ATTRIBUTE_PREFIX): value for key, value in attributes.items()
            if key.startswith(LABEL_ATTRIBUTE_PREFIX) and len(key) > len(LABEL_ATTRIBUTE_PREFIX)
            and isinstance(value, str)}


def merged_labels(label_sets: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """A trace's labels from those of its resources; a key given two values keeps the greater, so the answer does
    not depend on the order the rows were read in."""
    merged: dict[str, str] = {}
    for labels in label_sets:
        for key, value in labels.items():
            if key not in merged or value > merged[key]:
                merged[key] = value
    return merged


def common_labels(label_sets: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The labels every one of ``label_sets`` carries with the same value (a batch of several resources is decided
    on what holds for all of them: a condition on a label that differs between them fails)."""
    if not label_sets:
        return {}
    first, *rest = label_sets
    return {key: value for key, value in first.items() if all(other.get(key) == value for other in rest)}


def stamp_resource_labels(resources: Iterable[Any], labels: Mapping[str, str]) -> None:
    """Write ``labels`` onto each OTLP ``Resource`` as ``evalsi.label.<key>`` string attributes, replacing what the
    resource gave for the same key (the credential's labels are not the sender's to change)."""
    if not labels:
        return
    keys = {LABEL_ATTRIBUTE_PREFIX + key: value for key, value in labels.items()}
    for resource in resources:
        kept = [attribute for attribute in resource.attributes if attribute.key not in keys]
        del resource.attributes[:]
        resource.attributes.extend(kept)
        for key, value in keys.items():
            attribute = resource.attributes.add()
            attribute.key = key
            attribute.value.string_value = value


def parse_label_filters(items: Sequence[str], field: str) -> dict[str, str]:
    """``key=value`` items as a map; a malformed one, or a key given twice (a resource has one value per label, so
    the filter could match nothing), is refused naming ``field[index]``."""
    # Each filter is a clause of the store's query: as many, and as long, as a run's labels may be.
    check_count(len(items), field, MAX_LABELS, "label filters")
    labels: dict[str, str] = {}
    for index, item in enumerate(items):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInputError(f"{field}[{index}]: expected key=value, got {item[:80]!r}")
        if len(key.strip()) > MAX_LABEL_KEY_CHARS or len(value.strip()) > MAX_LABEL_VALUE_CHARS:
            raise BadInputError(f"{field}[{index}]: a label key is at most {MAX_LABEL_KEY_CHARS} characters and a "
                                f"value at most {MAX_LABEL_VALUE_CHARS}")
        if key.strip() in labels:
            raise BadInputError(f"{field}[{index}]: label {key.strip()!r} is given twice; a label has one value, "
                                "give each key once")
        labels[key.strip()] = value.strip()
    return labels
