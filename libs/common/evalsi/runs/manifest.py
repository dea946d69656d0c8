"""What a run ran, written down: the spec's hash, the dataset and its version, the evaluators with their params, the
judges and what cannot be pinned, the package versions. ``runs.outcome.run_manifest`` adds the target and the seed."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any, Protocol

from google.protobuf import json_format, timestamp_pb2

from evalsi.evaluators import BoundEvaluator
from evalsi.records import canonical_json
from evalsi.v1alpha1.run_pb2 import EvaluatorVersion, RunManifest, RunSpec


class DatasetIdentity(Protocol):
    @property
    def source(self) -> str: ...

    @property
    def version(self) -> str: ...


def timestamp_of(seconds: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def package_versions() -> dict[str, str]:
    versions = {}
    for name in ("evalsi", "protobuf", "numpy", "scipy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    versions["python"] = sys.version.split()[0]
    return versions


def build_manifest(
    dataset: DatasetIdentity, spec: RunSpec, bound: Sequence[BoundEvaluator], judges: Mapping[str, Any]
) -> RunManifest:
    """The manifest of ``spec`` over ``dataset`` with ``bound`` evaluators and ``judges`` (JudgeConfigs by name)."""
    canonical = canonical_json(json_format.MessageToDict(spec))
    versions = package_versions()
    manifest = RunManifest(
        spec_hash=hashlib.sha256(canonical.encode()).hexdigest(),
        dataset=dataset.source,
        dataset_version=dataset.version,
        target="outputs given",
        seed=spec.summary.seed,
        evalsi_version=versions["evalsi"],
        created=timestamp_of(time.time()),
    )
    manifest.package_versions.update(versions)
    for b in bound:
        entry = EvaluatorVersion(alias=b.alias, ref=b.evaluator.ref)
        if b.params:
            entry.params.update(b.params)
        if "judge" in b.evaluator.requires and b.judge in judges:
            entry.judge = b.judge
        manifest.evaluators.append(entry)
    for name, config in judges.items():
        manifest.judges[name] = f"{config.provider}:{config.model} @ {config.base_url}"
        manifest.unpinned.append(
            f"judge {name}: {config.provider} model {config.model!r} is served by an API and cannot be pinned"
        )
    return manifest
