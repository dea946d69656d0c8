"""Is a run's cluster key (``--cluster-by``, ``spec.summary.clusterBy``) a key the records have?

A key no record has would make every record its own cluster: intervals computed as if clustered while nothing
is, with no sign of the typo. So a key no record carries is refused (naming the flag or field, the key, the keys
the records do carry and the nearest of them), and a key some records lack is a warning with the count (those
records form clusters of their own, as docs/statistics.md says). One pass over the records, holding only the
counts and the distinct metadata keys met (at most ``KEYS_KEPT`` of them).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from evalsi.errors import BadInputError
from evalsi.v1alpha1.record_pb2 import Record

KEYS_KEPT = 200  # distinct metadata keys remembered for the message; a dataset with more is named "and more"
KEYS_SHOWN = 12


@dataclass
class ClusterKeyCensus:
    """How many records carry ``key`` in their metadata, of how many, and which keys they carry."""

    key: str
    records: int = 0
    having: int = 0
    keys: dict[str, None] = field(default_factory=dict)  # in the order met
    more_keys: bool = False

    def add(self, records: Iterable[Record]) -> ClusterKeyCensus:
        key, keys = self.key, self.keys
        for record in records:
            self.records += 1
            metadata = record.metadata
            if key in metadata and metadata[key].WhichOneof("kind") is not None:
                self.having += 1
            elif not self.more_keys:
                for name in metadata:
                    if name not in keys:
                        if len(keys) >= KEYS_KEPT:
                            self.more_keys = True
                            break
                        keys[name] = None
        return self

    def problem(self, flag: str) -> str:
        """The refusal when no record carries the key (empty otherwise, or when there are no records)."""
        if self.having or not self.records:
            return ""
        known = sorted(self.keys)
        hint = ""
        close = difflib.get_close_matches(self.key, known, n=1)
        if close:
            hint = f" (did you mean {close[0]!r}?)"
        if known:
            shown = ", ".join(known[:KEYS_SHOWN]) + (", ..." if len(known) > KEYS_SHOWN or self.more_keys else "")
            have = f"the records' metadata keys: {shown}"
        else:
            have = "the records carry no metadata keys (top-level fields other than id, input, output, reference, "\
                   "context go to metadata under their own name)"
        return f"{flag} {self.key!r}: no record has this metadata key{hint}; {have}"

    def warning(self, flag: str) -> str:
        """The warning when some records lack the key (empty when every record has it, or none does)."""
        missing = self.records - self.having
        if not self.having or not missing:
            return ""
        return (
            f"{flag} {self.key!r}: {missing} of {self.records} records lack this metadata key; each of "
            "them is a cluster of its own"
        )


Warn = Callable[[str], None]


class ClusterKeyWarning(UserWarning):
    """Some records lack the cluster key (each is a cluster of its own)."""


def warn_by_default(message: str) -> None:
    """How a library caller hears a warning when it gives no ``warn``: Python's warnings (the CLI prints instead)."""
    warnings.warn(message, ClusterKeyWarning, stacklevel=2)


def refuse_unknown_cluster_key(records: Iterable[Record], key: str, flag: str) -> str:
    """Raise ``BadInputError`` when no record has ``key``; else the warning to print (empty when none)."""
    counted = ClusterKeyCensus(key).add(records)
    problem = counted.problem(flag)
    if problem:
        raise BadInputError(problem)
    return counted.warning(flag)
