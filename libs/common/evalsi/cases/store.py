"""Cases in the metadata store: import a corpus, export it back, load a tenant's cases to run (docs/cases.md).

A corpus file is split into its YAML documents by the parser's own document marks, and each case's document
is stored as it was written, comments included; its file (relative to the corpus root), its index in that
file and its first line go with it. Exporting concatenates a file's documents in order, so a corpus comes
back byte for byte. The store is tenant-scoped: every read names the tenant, and another tenant's case is
answered exactly as a missing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalsi.cases.loader import case_files, load_cases, load_text
from evalsi.cases.model import BrokenCase, Case
from evalsi.errors import BadInputError
from evalsi.stores.metadata import CaseImport, MetadataStore, StoredCase

# How a stored case names itself in reports and errors: ``store:<path in the corpus>:<line>``.
STORE_PREFIX = "store:"


class CaseNotFound(BadInputError):
    """No case with this id in this tenant; a case of another tenant is reported exactly the same way."""

    def __init__(self, case_id: str, project: str, tenant: str) -> None:
        super().__init__(f"case {case_id!r}: not found in project {project!r}, tenant {tenant!r}")


@dataclass(frozen=True)
class Corpus:
    """A directory of cases read for import: every document to store, or the broken ones that stop it."""

    documents: list[StoredCase]
    broken: list[BrokenCase]


def split_documents(text: str) -> list[tuple[int, str]]:
    """``text`` cut before each YAML document after the first: (first line, slice) pairs that concatenate
    back to ``text`` exactly. Comments between two documents go with the earlier one."""
    # The parser marks every event; the stubs allow None for events built by hand.
    starts = [event.start_mark for event in yaml.parse(text, Loader=yaml.SafeLoader)
              if isinstance(event, yaml.DocumentStartEvent) and event.start_mark is not None]
    # The first document owns everything before it (a leading comment); the others start at their own line.
    bounds = [(0, 0)] + [(mark.index - mark.column, mark.line) for mark in starts[1:]]
    ends = [index for index, _ in bounds[1:]] + [len(text)]
    return [(line + 1, text[index:end]) for (index, line), end in zip(bounds, ends, strict=True)]


def read_corpus(source: str | Path) -> Corpus:
    """Every case under ``source``, validated as ``evalsi cases run`` would, split into storable documents.

    Any broken case (including a duplicate id) makes ``broken`` non-empty and ``documents`` empty: an import
    is all or nothing.
    """
    items = load_cases(source)
    broken = [item for item in items if isinstance(item, BrokenCase)]
    if broken:
        return Corpus([], broken)
    root = Path(source)
    documents: list[StoredCase] = []
    for file in case_files(source):
        relative = file.name if file == root else file.relative_to(root).as_posix()
        text = file.read_text(encoding="utf-8")
        for position, (line, piece) in enumerate(split_documents(text)):
            (case,) = load_text(piece, str(file), first_line=line)  # the whole file loaded, so each slice does
            if not isinstance(case, Case):
                raise BadInputError(f"{case.error} (a case document that only loads within its whole file; "
                                    "put this case in a file of its own)")
            documents.append(StoredCase(tenant=case.tenant, case_id=case.id, agent=case.agent, path=relative,
                                        position=position, line=line, yaml=piece))
    return Corpus(documents, [])


async def import_corpus(store: MetadataStore, project: str, corpus: Corpus, *, keep_existing: bool) -> CaseImport:
    """Store a corpus that read without a broken case (``read_corpus``), in one transaction."""
    if corpus.broken:
        raise BadInputError(f"{len(corpus.broken)} broken case(s); nothing imported")
    return await store.put_cases(project, corpus.documents, keep_existing=keep_existing)


def join_documents(texts: Sequence[str]) -> str:
    """A file's stored documents back into one text: exactly the imported file when all of them are present.

    When some are not (another tenant's, or a later import moved one), a document that would run into the
    previous one gets the line break and ``---`` it needs, so the file still holds one case per document.
    """
    out = ""
    for text in texts:
        if out:
            if not out.endswith("\n"):
                out += "\n"
            if not _starts_with_marker(text):
                out += "---\n"
        out += text
    return out


def _starts_with_marker(text: str) -> bool:
    """Whether the document opens with its own ``---`` (possibly after comments)."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.DocumentStartEvent):
            return bool(event.explicit)
    return False


async def export_cases(store: MetadataStore, project: str, tenant: str, directory: str | Path, *,
                       force: bool) -> list[Path]:
    """Write the tenant's stored cases under ``directory`` at the paths they came from; the files written.

    An existing file is overwritten only with ``force`` (its comments would be lost otherwise); without it
    nothing is written when any target exists.
    """
    root = Path(directory)
    files: dict[str, list[str]] = {}
    for case in await store.list_cases(project, tenant):  # in path, then position order
        files.setdefault(case.path, []).append(case.yaml)
    if not files:
        raise BadInputError(f"no case stored in project {project!r}, tenant {tenant!r}; nothing to export")
    targets = {}
    for path in files:
        target = root / path
        # A stored path is one import computed, but the database is not ours alone: never write outside --dir.
        if Path(path).is_absolute() or not target.resolve().is_relative_to(root.resolve()):
            raise BadInputError(f"stored case path {path!r} leaves --dir {directory}; refusing to export it")
        targets[path] = target
    existing = sorted(str(target) for target in targets.values() if target.exists())
    if existing and not force:
        shown = ", ".join(existing[:5]) + (f" and {len(existing) - 5} more" if len(existing) > 5 else "")
        raise BadInputError(f"--dir {directory}: {len(existing)} file(s) exist ({shown}); an export would drop "
                            "what they hold beyond the stored cases: pass --force to overwrite them")
    for path, texts in files.items():
        targets[path].parent.mkdir(parents=True, exist_ok=True)
        targets[path].write_text(join_documents(texts), encoding="utf-8")
    return [targets[path] for path in files]


def load_stored(case: StoredCase) -> Case | BrokenCase:
    """A stored case as the runner takes it; broken (never dropped) when its YAML no longer validates or no
    longer says the id and tenant it is stored under."""
    name = f"{STORE_PREFIX}{case.path}"
    items = load_text(case.yaml, name, first_line=case.line)
    if len(items) != 1:
        return BrokenCase(name, case.line, f"{name}:{case.line}: a stored case holds {len(items)} YAML documents; "
                          "expected one", case.case_id, case.agent)
    (item,) = items
    if isinstance(item, Case) and (item.id, item.tenant) != (case.case_id, case.tenant):
        return BrokenCase(name, case.line, f"{item.where}: stored as case {case.case_id!r} of tenant "
                          f"{case.tenant!r} but its YAML says {item.id!r} of {item.tenant!r}; re-import it",
                          case.case_id, case.agent)
    return item


async def stored_cases(store: MetadataStore, project: str, tenant: str, *, agent: str = "",
                       case_id: str | None = None) -> list[Case | BrokenCase]:
    """The tenant's cases to run: all of them (only ``agent``'s when given), or the one ``case_id``
    (whatever its agent: the runner's own ``agent`` filter then reports a mismatch).

    A ``case_id`` of another tenant raises the same ``CaseNotFound`` as one that does not exist.
    """
    if case_id is not None:
        found = await store.get_case(project, tenant, case_id)
        if found is None:
            raise CaseNotFound(case_id, project, tenant)
        return [load_stored(found)]
    return [load_stored(case) for case in await store.list_cases(project, tenant, agent=agent)]
