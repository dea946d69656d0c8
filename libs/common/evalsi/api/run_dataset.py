"""The dataset of a submitted run, read from the server's datasets directory and never outside it."""

from __future__ import annotations

from pathlib import Path

from evalsi.datasets import Dataset
from evalsi.errors import BadInputError
from evalsi.v1alpha1.run_pb2 import EvalRun


def load_run_dataset(run: EvalRun, *, datasets_dir: Path) -> Dataset:
    """The records of ``run.spec.dataset`` (a path under ``datasets_dir``, symlinks resolved), with its version.

    The same loader as embedded runs, confined to the datasets directory; only files are read (a stored
    ``ref`` or ``hf://`` source is refused by name). Records name the dataset as the caller gave it.
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
    from evalsi.runs import load_run_dataset as load

    given = source.path
    try:
        dataset = load(run, base_dir=Path(datasets_dir), datasets_dir=Path(datasets_dir))
    except BadInputError as exc:
        message = str(exc).removeprefix("spec.dataset.path: ")
        # Say where as the caller wrote it, not where the server keeps its files.
        full = str(Path(datasets_dir).resolve() / given)
        raise BadInputError(f"spec.dataset.path: {message.replace(full, given)}") from None
    for record in dataset.records:
        record.provenance.dataset = given
    return Dataset(records=dataset.records, version=dataset.version, source=given, format=dataset.format)
