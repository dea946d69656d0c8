"""Counting the keys seen so far in about 8 bytes a key, so checking the ids of a big dataset as it streams past
does not keep every id as a Python object (a set of a million ids and trials is some 200 MiB)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Hashable
from heapq import merge

_RECENT_KEYS = 1 << 16
_UNSIGNED = (1 << 64) - 1


class SeenKeys:
    """How many times each key was seen before.

    A key is kept as its 64-bit hash: the latest ones in a set, the others in one sorted array (8 bytes each)
    that the set is merged into when it fills; exact counts only for keys seen more than once. Two keys with
    the same hash (a chance of about n²/2⁶⁵: one in 3·10⁷ for a million keys) would count as one.
    """

    def __init__(self) -> None:
        self._recent: set[int] = set()
        self._older = array("Q")
        self._repeats: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._recent) + len(self._older)

    def count(self, key: Hashable) -> int:
        """How many times ``key`` was seen before this call; this call counts as one more."""
        digest = hash(key) & _UNSIGNED  # stable within the process, which is all a stream needs
        repeats = self._repeats
        seen = repeats.get(digest)
        if seen is not None:
            repeats[digest] = seen + 1
            return seen
        if digest in self._recent or self._in_older(digest):
            repeats[digest] = 2
            return 1
        self._recent.add(digest)
        if len(self._recent) >= _RECENT_KEYS:
            self._older = array("Q", merge(self._older, sorted(self._recent)))
            self._recent = set()
        return 0

    def _in_older(self, digest: int) -> bool:
        older = self._older
        index = bisect_left(older, digest)
        return index < len(older) and older[index] == digest
