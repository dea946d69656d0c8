"""Counting the keys seen so far in about 8 bytes a key, so checking the ids of a big dataset as it streams past
does not keep every id as a Python object (a set of a million ids and trials is some 200 MiB)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Hashable, Sequence

_RECENT_KEYS = 1 << 16
_UNSIGNED = (1 << 64) - 1
_FILTER_BITS = 1 << 23  # 1 MiB, made at the first merge: about 1 in 8 lookups of a new key bisects at 1,000,000 keys
_FILTER_MASK = _FILTER_BITS - 1


class SeenKeys:
    """How many times each key was seen before.

    A key is kept as its 64-bit hash: the latest ones in a set, the others in one sorted array (8 bytes each)
    that the set is merged into when it fills; exact counts only for keys seen more than once. A bitmap of the
    older hashes answers most lookups of a new key without a bisection. Two keys with the same hash (a chance of
    about n²/2⁶⁵: one in 3·10⁷ for a million keys) would count as one.
    """

    def __init__(self) -> None:
        self._recent: set[int] = set()
        self._older = array("Q")
        self._filter: bytearray | None = None
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
        recent = self._recent
        if digest in recent or (self._filter is not None and self._in_older(digest)):
            repeats[digest] = 2
            return 1
        recent.add(digest)
        if len(recent) >= _RECENT_KEYS:
            self._merge()
        return 0

    def count_all(self, keys: Sequence[Hashable]) -> list[int]:
        """``count`` of each of ``keys`` in turn. Keys new to the counter and to each other (a dataset's usual
        rows) are told apart at C speed, with no call a key; any other batch is counted a key at a time."""
        digests = [hash(key) & _UNSIGNED for key in keys]
        fresh = set(digests)
        # A key counted twice is in the recent set or the array as well, so those two answer for the repeats.
        if len(fresh) == len(digests) and fresh.isdisjoint(self._recent) and not self._any_older(digests):
            self._recent |= fresh
            if len(self._recent) >= _RECENT_KEYS:
                self._merge()
            return [0] * len(digests)
        return [self.count(key) for key in keys]

    def seen(self, key: Hashable) -> int:
        """How many times ``key`` was seen, without counting this look."""
        digest = hash(key) & _UNSIGNED
        seen = self._repeats.get(digest)
        if seen is not None:
            return seen
        return 1 if digest in self._recent or self._in_older(digest) else 0

    def _in_older(self, digest: int) -> bool:
        bits = self._filter
        if bits is None:
            return False
        bit = digest & _FILTER_MASK
        if not bits[bit >> 3] & (1 << (bit & 7)):
            return False
        older = self._older
        index = bisect_left(older, digest)
        return index < len(older) and older[index] == digest

    def _any_older(self, digests: list[int]) -> bool:
        """Whether any of ``digests`` is in the sorted array: one vectorized bisection for the lot."""
        if not self._older:
            return False
        import numpy as np  # there are older keys only after a merge, which loaded numpy

        older = np.frombuffer(self._older, dtype=np.uint64)
        wanted = np.sort(np.array(digests, dtype=np.uint64))  # sorted keys bisect in half the time
        at = np.minimum(np.searchsorted(older, wanted), len(older) - 1)
        return bool((older[at] == wanted).any())

    def _merge(self) -> None:
        """Move the recent keys into the sorted array (and the bitmap): one C-speed sort, no Python loop a key."""
        import numpy as np  # the api and CLI load numpy anyway; only a stream past 65,536 keys gets here

        recent = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
        merged = np.concatenate((np.frombuffer(self._older, dtype=np.uint64), recent))
        self._older = array("Q")  # the old array goes before the new one is made: two copies at most, never three
        merged.sort()
        older = array("Q")
        older.frombytes(merged.view(np.uint8).data)
        self._older = older
        if self._filter is None:
            self._filter = bytearray(_FILTER_BITS // 8)
        bits = np.frombuffer(self._filter, dtype=np.uint8)
        low = np.sort(recent & np.uint64(_FILTER_MASK))
        positions = (low >> np.uint64(3)).astype(np.intp)
        masks = np.left_shift(np.uint8(1), (low & np.uint64(7)).astype(np.uint8))
        starts = np.flatnonzero(np.concatenate(([True], positions[1:] != positions[:-1])))
        # One OR per byte of the bitmap: the masks of the keys that fall into it, combined first.
        bits[positions[starts]] |= np.bitwise_or.reduceat(masks, starts)
        self._recent = set()
