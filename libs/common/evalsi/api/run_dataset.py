"""The dataset of a submitted run, read from the server's datasets directory and never outside it."""

from __future__ import annotations

import os
from pathlib import Path

from evalsi.datasets import Dataset
from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError
from evalsi.runs.spec import resolve_dataset_path
from evalsi.v1alpha1.run_pb2 import EvalRun


def load_run_dataset(run: EvalRun, *, datasets_dir: Path) -> Dataset:
    """The records of ``run.spec.dataset`` (a path under ``datasets_dir``, symlinks resolved), with its version.

    The same loader as embedded runs, confined to the datasets directory; only files are read (a stored
    ``ref`` or ``hf://`` source is refused by name). Records name the dataset as the caller gave it, and so do
    errors: never the server's absolute paths, nor where a symbolic link leads.
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
    from evalsi.runs.embedded import load_run_dataset as load

    given = source.path
    root = Path(datasets_dir)
    real = resolve_dataset_path(run, base_dir=root, datasets_dir=root)  # refuses (safely) what leads outside
    try:
        dataset = load(run, base_dir=root, datasets_dir=root)
    except BadInputError as exc:
        raise BadInputError(f"spec.dataset.path: {_as_given(str(exc), given, real, root)}") from None
    except OSError as exc:  # unreadable: say why, not where
        raise BadInputError(f"spec.dataset.path: {given!r}: cannot be read ({exc.strerror or type(exc).__name__})") \
            from None
    for index, record in enumerate(dataset.records):
        # Record ids key result rows (a Postgres text column): one the store cannot hold is refused here.
        problem = text_problem(record.id)
        if problem:
            raise BadInputError(f"spec.dataset.path: {given!r}: record {index + 1}: its id {problem}")
        record.provenance.dataset = given
    return Dataset(records=dataset.records, version=dataset.version, source=given, format=dataset.format)


def _as_given(message: str, given: str, real: Path, root: Path) -> str:
    """``message`` with the file named as the caller wrote it and any other path relative to the datasets
    directory (as configured, and as it really is when it is itself reached through a link)."""
    message = message.removeprefix("spec.dataset.path: ").replace(str(real), given)
    for prefix in {str(root.absolute()), os.path.realpath(root)}:
        message = message.replace(prefix + os.sep, "")
    return message
