"""The dataset of a submitted run, read from the server's datasets directory and never outside it."""

from __future__ import annotations

from pathlib import Path

from evalsi.datasets import Dataset, load_dataset
from evalsi.errors import BadInputError
from evalsi.v1alpha1.run_pb2 import EvalRun


def dataset_file(datasets_dir: Path, relative: str) -> Path:
    """``relative`` under ``datasets_dir``; absolute paths, ``..`` and symlinks leading out are refused."""
    where = "spec.dataset.path"
    if not relative.strip():
        raise BadInputError(f"{where}: a path relative to the server's datasets directory is required")
    path = Path(relative)
    if ".." in path.parts:
        raise BadInputError(f"{where}: {relative!r} must not contain '..'")
    base = datasets_dir.resolve()
    # Absolute paths are accepted inside the datasets directory: `evalsi run --server` on the same machine
    # sends the path it resolved next to the spec file.
    full = (base / path).resolve()
    if not full.is_relative_to(base):
        raise BadInputError(f"{where}: {relative!r} leads outside the server's datasets directory")
    return full


def load_run_dataset(run: EvalRun, *, datasets_dir: Path) -> Dataset:
    """The records of ``run.spec.dataset`` (a path under ``datasets_dir``), with its version.

    Errors and ``provenance.dataset`` show the path as the caller gave it, not the server's layout.
    """
    source = run.spec.dataset
    kind = source.WhichOneof("kind")
    if kind is None:
        raise BadInputError("spec.dataset.path: required (a file under the server's datasets directory)")
    if kind != "path":
        raise BadInputError(
            f"spec.dataset.{kind}: this server reads datasets only from files under its datasets directory; "
            "use spec.dataset.path"
        )
    relative = source.path
    full = dataset_file(datasets_dir, relative)
    try:
        dataset = load_dataset(
            full,
            mapping=dict(source.mapping) or None,
            limit=source.limit or None,
            format=source.format or None,
            split=source.split or None,
        )
    except BadInputError as exc:
        message = str(exc).replace(str(full), relative)
        raise BadInputError(f"spec.dataset.path: {message}") from None
    for record in dataset.records:
        record.provenance.dataset = relative
    return Dataset(records=dataset.records, version=dataset.version, source=relative, format=dataset.format)
