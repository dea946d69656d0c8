"""Per-slice statistics of one metric: its values grouped by a record's metadata (a dotted path), the evaluator,
the trial or the run, each slice with n, mean and an interval by the method and level the run summaries use
(``stats.summarize``: Wilson for pass/fail, Student-t for numbers, cluster-robust when a record repeats in a slice,
the seeded bootstrap when the run asked for it).
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from google.protobuf import json_format

from evalsi import stats
from evalsi.datasets import resolve_path
from evalsi.errors import BadInputError
from evalsi.runs.cluster_keys import KEYS_KEPT, ClusterKeyCensus
from evalsi.runs.compare import values_by_metric
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import VALUE_KIND_BOOLEAN, VALUE_KIND_NUMBER

BUILT_IN_FIELDS = ("evaluator", "trial", "run")
MISSING = "(missing)"
MAX_SLICES = 10_000  # distinct values of --by; past this it is an id, not a slice


@dataclass(frozen=True)
class Slice:
    value: str
    n: int
    mean: float | None
    low: float | None
    high: float | None
    method: str
    clusters: int  # 0 when the values are independent


@dataclass(frozen=True)
class SliceTable:
    metric: str
    by: str
    level: float
    slices: tuple[Slice, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "by": self.by, "level": self.level,
                "slices": [vars(s) for s in self.slices]}


def metadata_dict(record: Record) -> dict[str, Any]:
    """A record's metadata as plain JSON values."""
    return {key: json_format.MessageToDict(value) for key, value in record.metadata.items()}


def metadata_keys(metadata: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every dotted path into ``metadata``'s objects (``a``, ``a.b``), for naming what a record does carry."""
    keys = []
    for key, value in metadata.items():
        keys.append(prefix + key)
        if isinstance(value, dict):
            keys.extend(metadata_keys(value, prefix + key + "."))
    return keys


def field_value(metadata: Mapping[str, Any], path: str) -> str | None:
    """The value at a dotted path as slice text (strings as they are, other values as JSON); None when absent."""
    found, value = resolve_path(metadata, path)
    if not found or value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def check_field(by: str, records: Sequence[Mapping[str, Any]]) -> None:
    """Refuse (exit 2) a dotted path no record has, naming the keys the records do have and the nearest of them, as
    ``--cluster-by`` is refused."""
    census = ClusterKeyCensus(by)
    for metadata in records:
        census.records += 1
        if field_value(metadata, by) is not None:
            census.having += 1
        elif not census.more_keys:
            for key in metadata_keys(metadata):
                if len(census.keys) >= KEYS_KEPT:
                    census.more_keys = True
                    break
                census.keys.setdefault(key, None)
    problem = census.problem("--by")
    if problem:
        raise BadInputError(problem + f"; or one of {', '.join(BUILT_IN_FIELDS)}")


def resolve_metric(runs: Sequence[Run], metric: str) -> str:
    """``metric`` when a run has it as a numeric or pass/fail metric; else exit 2 naming those they have."""
    known: dict[str, None] = {}
    for run in runs:
        for summary in run.summaries:
            if summary.kind in (VALUE_KIND_NUMBER, VALUE_KIND_BOOLEAN) and not summary.k:
                known.setdefault(summary.metric, None)
    if metric in known:
        return metric
    close = difflib.get_close_matches(metric, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise BadInputError(f"METRIC {metric!r}: no source has this numeric or pass/fail metric{hint}; the metrics: "
                        f"{', '.join(known) or 'none'}")


def slice_metric(
    runs: Sequence[Run],
    metric: str,
    by: str,
    *,
    labels: Sequence[str],
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
    confidence: float | None = None,
) -> SliceTable:
    """``metric``'s values across ``runs`` (``labels`` names each run) grouped by ``by``: ``evaluator``, ``trial``,
    ``run``, the runs' ``--cluster-by`` key (which each result carries), or a dotted metadata path read from
    ``metadata`` (record id to its metadata). A record repeated within a slice (trials, or the same record in two
    runs) makes the slice's interval cluster-robust over records."""
    first = runs[0].spec.summary
    level = confidence or (runs[0].summaries[0].ci.level if runs[0].summaries else 0.0) or DEFAULT_CONFIDENCE
    binary = any(s.metric == metric and s.kind == VALUE_KIND_BOOLEAN for run in runs for s in run.summaries)
    groups: dict[str, list[tuple[float, str]]] = defaultdict(list)  # slice -> (value, cluster)
    for run, label in zip(runs, labels, strict=True):
        evaluator = next((s.evaluator for s in run.summaries if s.metric == metric), "")
        clusters = {r.record_id: r.cluster for r in run.results if r.cluster}
        for (record_id, trial), value in values_by_metric(run).get(metric, {}).items():
            if by == "evaluator":
                key: str | None = evaluator
            elif by == "trial":
                key = str(trial)
            elif by == "run":
                key = label
            elif by == run.spec.summary.cluster_by and record_id in clusters:
                key = clusters[record_id]
            else:
                key = None if metadata is None or record_id not in metadata else field_value(metadata[record_id], by)
            groups[key if key is not None else MISSING].append((value, clusters.get(record_id, record_id)))
            if len(groups) > MAX_SLICES:
                raise BadInputError(f"--by {by!r} has over {MAX_SLICES} distinct values: it names each record "
                                    "rather than a slice of them")
    method = "bootstrap" if first.interval == "bootstrap" else "auto"
    slices = [
        _slice(value, pairs, binary, level, method, first.seed, first.bootstrap_resamples)
        for value, pairs in sorted(groups.items(), key=lambda kv: (kv[0] == MISSING, kv[0]))
    ]
    return SliceTable(metric, by, level, tuple(slices))


def _slice(value: str, pairs: list[tuple[float, str]], binary: bool, level: float, method: str, seed: int,
           resamples: int) -> Slice:
    x = np.asarray([v for v, _ in pairs], dtype=np.float64)
    names = [c for _, c in pairs]
    clusters = names if len(set(names)) < len(names) else None
    aggregate = stats.summarize(
        x, binary=binary, clusters=clusters, level=level, method=cast(Any, method), seed=seed,
        resamples=resamples or DEFAULT_BOOTSTRAP_RESAMPLES,
    )
    return Slice(value, aggregate.n, aggregate.mean, aggregate.ci_low, aggregate.ci_high, aggregate.method or "",
                 len(set(names)) if clusters else 0)
