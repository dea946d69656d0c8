"""An embedded run's dataset (``evalsi run``): the spec's file or Hugging Face source opened as a stream, read once
as ``evaluate()`` reads its records (``runs.intake`` holds them or spills them to a local store), and what is
checked of the records before the run starts, gathered in the same one pass without keeping any record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evalsi.datasets import RecordStream, stream_dataset
from evalsi.errors import BadInputError
from evalsi.records import content_test
from evalsi.runs.cluster_keys import ClusterKeyCensus, Warn
from evalsi.runs.spec import resolve_dataset_path, target_kind
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

CLUSTER_BY_FIELD = "spec.summary.clusterBy"


def open_run_dataset(run: EvalRun, *, base_dir: Path | None = None, datasets_dir: Path | None = None) -> RecordStream:
    """The spec's dataset as a stream: ``path`` (relative to ``base_dir``) or ``hf``; a stored ``ref`` needs a
    server. Nothing is read until the stream is."""
    source = run.spec.dataset
    kind = source.WhichOneof("kind")
    mapping = dict(source.mapping) or None
    limit = source.limit or None
    if kind == "ref":
        raise BadInputError(
            f"spec.dataset.ref: {source.ref!r} is a stored dataset, which needs the server; embedded runs read "
            "files (spec.dataset.path) or Hugging Face datasets (spec.dataset.hf)"
        )
    if kind == "hf":
        return stream_dataset(source.hf, mapping=mapping, limit=limit, split=source.split or None)
    if kind != "path":
        raise BadInputError("spec.dataset: required: a path (a file) or hf (hf://owner/name)")
    path = resolve_dataset_path(run, base_dir=base_dir, datasets_dir=datasets_dir)
    if source.split:
        raise BadInputError(f"spec.dataset.split: applies to hf datasets only, not to the file {source.path!r}")
    return stream_dataset(path, mapping=mapping, limit=limit, format=source.format or None)


@dataclass
class DatasetChecks:
    """What must hold of a run's records before it starts, counted as they pass: with the outputs given (no target
    to generate them) some record has one; a ``spec.summary.clusterBy`` key is one the records carry."""

    needs_output: bool
    cluster_keys: ClusterKeyCensus | None
    has_output: bool = False

    @classmethod
    def of(cls, run: EvalRun) -> DatasetChecks:
        key = run.spec.summary.cluster_by
        return cls(target_kind(run) == "outputs", ClusterKeyCensus(key) if key else None)

    @property
    def wanted(self) -> bool:
        """Whether more records can change what the checks say."""
        return (self.needs_output and not self.has_output) or self.cluster_keys is not None

    def add(self, records: Sequence[Record]) -> None:
        if self.needs_output and not self.has_output:
            has = content_test("output")
            self.has_output = any(has(record) for record in records)
        if self.cluster_keys is not None:
            self.cluster_keys.add(records)

    def settle(self, dataset: str, *, source: str, warn: Warn) -> None:
        """Refuse what does not hold (naming ``dataset``, or the spec file ``source`` for the cluster key); hand a
        cluster key some records lack to ``warn``."""
        if self.needs_output and not self.has_output:
            raise BadInputError(
                f"{dataset}: no record has an output; with target.outputs (or no target) the dataset must "
                "carry the outputs; to generate them, give spec.target.model"
            )
        if self.cluster_keys is not None:
            prefix = f"{source}: " if source else ""
            problem = self.cluster_keys.problem(CLUSTER_BY_FIELD)
            if problem:
                raise BadInputError(prefix + problem)
            warning = self.cluster_keys.warning(CLUSTER_BY_FIELD)
            if warning:
                warn(warning)
