"""Benchmark formats read as datasets: a ``scheme://`` source, or a file with ``format`` set to the benchmark's.

Each importer turns its benchmark's own files into rows of the usual conventions (``evalsi.datasets.loader``):
BFCL and tau2 with the reference their grader in the ``benchmarks`` pack reads, SWE-bench, Terminal-Bench and Harbor as
harness tasks (metadata ``environment``) graded by their checker. A served run names a file under the server's
datasets directory with ``format`` (the scheme form reads any local path, so it is for embedded runs; a served spec
naming a scheme in ``path`` finds no such file there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evalsi.datasets import bfcl, harbor, swebench, tau2, terminal_bench
from evalsi.errors import BadInputError

OpenRows = Callable[[], Iterator[tuple[int, Any]]]

# scheme -> format; format -> (how the part after the scheme names a file, the reader of that file)
SCHEMES = {bfcl.SCHEME: bfcl.FORMAT, tau2.SCHEME: tau2.FORMAT, swebench.SCHEME: swebench.FORMAT,
           terminal_bench.SCHEME: terminal_bench.FORMAT, harbor.SCHEME: harbor.FORMAT,
           harbor.ORACLE_SCHEME: harbor.ORACLE_FORMAT}
_IMPORTERS: dict[str, tuple[Callable[[str, str], Path], Callable[[Path, str], Iterator[tuple[int, Any]]]]] = {
    bfcl.FORMAT: (bfcl.question_file, bfcl.read_bfcl),
    tau2.FORMAT: (tau2.domain_dir, tau2.read_tau2),
    swebench.FORMAT: (swebench.instances_file, swebench.read_swebench),
    terminal_bench.FORMAT: (terminal_bench.tasks_dir, terminal_bench.read_terminal_bench),
    harbor.FORMAT: (harbor.tasks_dir, harbor.read_harbor),
    harbor.ORACLE_FORMAT: (harbor.tasks_dir, harbor.read_harbor_oracle),
}
FORMATS = tuple(_IMPORTERS)


def imported_rows(source: str | Path, format: str | None, name: str) -> tuple[str, OpenRows] | None:
    """``(format, open_rows)`` when ``source`` is a benchmark's (its scheme, or ``format`` one of
    :data:`FORMATS`); None for any other source. The file is found now, read when the rows are opened."""
    text = str(source)
    scheme = next((s for s in SCHEMES if text.startswith(s)), None)
    if scheme is None and format not in _IMPORTERS:
        return None
    if scheme is not None:
        fmt = SCHEMES[scheme]
        if format not in (None, fmt):
            raise BadInputError(f"{name}: format {format!r} does not apply to {scheme} sources")
        find, read = _IMPORTERS[fmt]
        path = find(text[len(scheme):], name)
    else:
        fmt = str(format)
        find, read = _IMPORTERS[fmt]
        path = Path(source).expanduser()
    return fmt, lambda: read(path, name)
