"""A trace's labels, read from what both stores already keep with every span: its resource's JSON (pure SQL).

Labels live on the resource (``evalsi.label.<key>``, the ingest key's labels stamped over them at the gate), and
each span row holds its resource as ``json.dumps(resource, sort_keys=True)``, so a trace's labels need no column
or migration of their own: they are its distinct resources' labels, merged. A label filter looks for the exact
JSON member ``"evalsi.label.<key>": "<value>"`` in a span's resource: inside a JSON string a quote is escaped, so
the member cannot match a value, and both quotes around key and value make it exact (``app`` never matches
``my.app``, ``checkout`` never ``checkout2``). ``instr`` (SQLite) and ``position`` (ClickHouse 18.16) do the search.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from evalsi.labels import LABEL_ATTRIBUTE_PREFIX, merged_labels, resource_labels


class _Dialect(Protocol):
    @property
    def correlated_exists(self) -> bool: ...
    @property
    def final(self) -> str: ...


class Query(Protocol):
    """``query.Query`` as used here (``query`` builds its filters with this module: no import back)."""

    sql: str

    @property
    def dialect(self) -> _Dialect: ...
    def param(self, value: Any) -> str: ...
    def project_key(self, project: str) -> list[str]: ...

Q = TypeVar("Q", bound=Query)

# Traces per labels query: the page a list returns (a few hundred at most) fits in one IN list.
_IDS_PER_QUERY = 1000


def label_member(key: str, value: str) -> str:
    """The JSON text of the label as a member of a resource serialized the way the stores write it."""
    return f"{json.dumps(LABEL_ATTRIBUTE_PREFIX + key)}: {json.dumps(value)}"


def label_clauses(q: Query, project: str, labels: Mapping[str, str]) -> list[str]:
    """One clause per label: the trace has a span whose resource carries it (SQLite: a correlated EXISTS, a
    primary-key range per trace; ClickHouse 18.16, which has no correlated subqueries: ``trace_id IN``)."""
    clauses = []
    for key, value in sorted(labels.items()):
        if q.dialect.correlated_exists:
            clauses.append("EXISTS (SELECT 1 FROM spans l WHERE l.project_id = traces.project_id AND "
                           "l.tenant_id = traces.tenant_id AND l.trace_id = traces.trace_id AND "
                           f"instr(l.resource, {q.param(label_member(key, value))}) > 0)")
        else:
            member = q.param(label_member(key, value))
            where = " AND ".join([*q.project_key(project), f"position(resource, {member}) > 0"])
            clauses.append(f"trace_id IN (SELECT trace_id FROM spans WHERE {where})")
    return clauses


def resources_query(q: Q, project: str, trace_ids: Sequence[str]) -> Q:
    """Each trace's distinct resources (JSON), for ``labels_by_trace``."""
    where = [*q.project_key(project), f"trace_id IN ({', '.join(q.param(t.lower()) for t in trace_ids)})"]
    q.sql = f"SELECT DISTINCT trace_id, resource FROM spans{q.dialect.final} WHERE {' AND '.join(where)}"
    return q


def labels_by_trace(rows: Sequence[Sequence[Any]]) -> dict[str, dict[str, str]]:
    """Each trace's labels from its ``(trace_id, resource JSON)`` rows; traces without labels are left out."""
    sets: dict[str, list[dict[str, str]]] = {}
    for trace_id, resource in rows:
        if LABEL_ATTRIBUTE_PREFIX in resource:  # most resources carry none: skip decoding them
            sets.setdefault(str(trace_id), []).append(resource_labels(json.loads(resource)))
    merged = {trace_id: merged_labels(found) for trace_id, found in sets.items()}
    return {trace_id: labels for trace_id, labels in merged.items() if labels}


def chunks(trace_ids: Sequence[str]) -> list[Sequence[str]]:
    return [trace_ids[start:start + _IDS_PER_QUERY] for start in range(0, len(trace_ids), _IDS_PER_QUERY)]
