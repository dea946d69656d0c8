"""The n-gram counts of many (hypothesis, reference) pairs at once, for the text pack's batch forms: each text's
tokens become integer ids through one vocabulary, an n-gram of a record becomes one int64 key (the record's index
in the top bits, the n ids below), and one sort of both sides' keys gives every record's clipped matches (the sum
over its n-grams of the smaller of the two counts) for that order. The metrics then score these counts with the
same Python functions their per-record path uses, so the floats are the same bit for bit.

The streams hold the records a batch form covers (``_common.covered``), ``SEP`` between one record's tokens and
the next record's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalsi.packs.text._common import SEP

_BITS = 63  # a key and its side bit stay a non-negative int64
_LCS_WORDS = 64  # ROUGE-L's bit-parallel LCS on one uint64 per record: targets of at most this many words
_LCS_STEPS = 512  # and predictions of at most this many (a column each), so the matrix stays small:
_LCS_ROWS = 8192  # at most this many records a call (32 MB of uint64); the runner's chunks are 2,048
_RANK_BITS = 20  # a word's rank among its equals in one text: a text has at most MAX_CHARS (20,000) words


@dataclass
class Stream:
    """The tokens of one side of many records as ids, in record order, SEP between records."""

    ids: np.ndarray  # int64 token ids; SEP's id (0) between records
    record: np.ndarray  # each position's record index (a SEP counts with the record after it)
    token: np.ndarray  # bool: the position is a token, not a SEP
    lengths: np.ndarray  # tokens per record

    @classmethod
    def of(cls, ids: np.ndarray, records: int) -> Stream:
        """Each record's span (its SEP and tokens) from the SEPs' positions: the record index is the span's
        repeated, several times cheaper than a running count of the SEPs."""
        is_sep = ids == 0
        bounds = np.concatenate(([0], np.flatnonzero(is_sep), [len(ids)]))
        spans = np.diff(bounds)
        lengths = np.zeros(max(records, len(spans)), dtype=np.int64)
        lengths[:len(spans)] = spans
        lengths[1:len(spans)] -= 1  # every record but the first holds the SEP before it
        return cls(ids, np.repeat(np.arange(len(spans), dtype=np.int64), spans), ~is_sep, lengths)


def word_streams(hypotheses: list[str], references: list[str], records: int) -> tuple[Stream, Stream, list[str]]:
    """Both sides' token lists (each record's tokens, SEP between records) as streams over one vocabulary, with
    the vocabulary (a token's id is its index there)."""
    vocabulary = dict.fromkeys([SEP])
    vocabulary.update(dict.fromkeys(hypotheses))
    vocabulary.update(dict.fromkeys(references))
    ids = {word: index for index, word in enumerate(vocabulary)}
    return (Stream.of(np.fromiter(map(ids.__getitem__, hypotheses), np.int64, len(hypotheses)), records),
            Stream.of(np.fromiter(map(ids.__getitem__, references), np.int64, len(references)), records),
            list(ids))


def char_streams(hypotheses: str, references: str, records: int) -> tuple[Stream, Stream, int]:
    """Both sides' characters (each record's text, SEP between records) as streams over their dense codes (the
    code points present, in order), with the number of codes."""
    hyp = np.frombuffer(hypotheses.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    ref = np.frombuffer(references.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    present = np.zeros(max(hyp.max(initial=0), ref.max(initial=0)) + 1, dtype=bool)
    present[hyp] = True
    present[ref] = True
    present[0] = True  # SEP, code point 0, keeps id 0 in a batch of one record too
    dense = np.cumsum(present) - 1
    return Stream.of(dense[hyp], records), Stream.of(dense[ref], records), int(dense[-1]) + 1


def _bit_length(value: int) -> int:
    return max(int(value), 1).bit_length()


def clipped_matches(hyp: Stream, ref: Stream, vocabulary: int, records: int, orders: int) -> list[np.ndarray]:
    """Each record's clipped n-gram matches between its hypothesis and its reference, for orders 1 to ``orders``
    (an int64 array a record, one per order). Both sides are one stream (the hypotheses, a SEP, the references)
    whose n-gram keys are the record's index above the n ids (``bits`` each), a side bit below. An n-gram across
    a SEP is kept, and harmless: the references' SEP is another id (``vocabulary``), so no such n-gram of one side
    equals one of the other. When the next order would not fit 63 bits, the keys so far are renumbered densely in
    order (their rank), which keeps the record in their order and frees the bits."""
    bits = _bit_length(vocabulary)
    ref_ids = ref.ids.copy()
    ref_ids[~ref.token] = vocabulary
    ids = np.concatenate((hyp.ids, [0], ref_ids))
    side = np.zeros(len(ids), dtype=np.int64)
    side[len(hyp.ids) + 1:] = 1
    record = np.concatenate((hyp.record, [records - 1], ref.record))
    padded_bits = _bit_length(vocabulary + 1)
    # One sort for every order where a key of the highest order fits (chrF's six character orders, mostly); for two
    # orders it measured no cheaper than a sort each.
    if orders > 2 and _bit_length(records) + orders * padded_bits + 1 <= _BITS:
        return _one_sort(ids, side, record, padded_bits, records, orders, vocabulary + 1)
    keys = record << bits | ids
    shift = bits  # a key's record is key >> shift, until renumbered
    bounds: np.ndarray | None = None  # once renumbered: the first key of each record, in the keys' order
    width = _bit_length(records) + bits
    out = []
    for order in range(1, orders + 1):
        if order > 1:
            if width + bits + 1 > _BITS:
                ranked, keys = np.unique(keys, return_inverse=True)
                bounds = np.searchsorted(ranked, np.arange(records, dtype=np.int64) << shift if bounds is None
                                         else bounds)
                width = _bit_length(len(ranked))
            keys = keys[:-1] << bits | ids[order - 1:]
            width += bits
            if bounds is None:
                shift += bits
            else:
                bounds = bounds << bits
        out.append(_matches(keys << 1 | side[:len(keys)], shift, bounds, records))
    return out


def _one_sort(ids: np.ndarray, side: np.ndarray, record: np.ndarray, bits: int, records: int, orders: int,
              pad: int) -> list[np.ndarray]:
    """``clipped_matches`` from one sort when a position's whole key fits 63 bits: its record, then the ids of its
    n-gram of the highest order (``pad`` past the stream's end, an id no text has), then its side. Sorted so, the
    keys of one n-gram of any lower order n are one run too (their top bits are its record and first n ids), whose
    entries of each side are counted from the sides' running sum: the smaller count is its matches. Only
    reference n-grams run past the end, and none of them equals a hypothesis n-gram, as in the per-order sorts.

    A run of order n starts where two neighbouring keys differ above their last orders - n ids (their XOR reaches
    that bit), so each order is one comparison of the same XORs. A run of h hypothesis and r reference entries
    matches min(h, r) = (h + r - |h - r|) / 2 times, and h - r is the difference of the running sum of +1 a
    hypothesis entry, -1 a reference one, at the run's ends; a record's runs are consecutive, so its matches are
    (its entries - the sum of its runs' |h - r|) / 2, the sum one ``np.add.reduceat`` from each record's first
    run (found among the runs' starts by one search of the records' first positions)."""
    size = len(ids)
    padded = np.concatenate((ids, np.full(orders - 1, pad, dtype=np.int64)))
    both = record.astype(np.int64)
    for offset in range(orders):
        both <<= bits
        both |= padded[offset:offset + size]
    both <<= 1
    both |= side
    both.sort()
    # The running +1/-1 sum; int32 holds it: a call's texts total at most BATCH_CHARS (_common.covered).
    balance = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(1 - 2 * (both & 1).astype(np.int32), out=balance[1:])
    differ = both[1:] ^ both[:-1]
    firsts = np.searchsorted(both >> (1 + orders * bits), np.arange(records + 1))  # each record's, then the end
    entries = np.diff(firsts)
    empty = entries == 0  # no entry (its texts were whitespace only): reduceat would give the next run's value
    change = np.ones(size + 1, dtype=bool)  # change[0] and change[size]: the first run's start, the end
    out = []
    for order in range(1, orders + 1):
        np.greater_equal(differ, 1 << (1 + (orders - order) * bits), out=change[1:size])
        starts = np.flatnonzero(change)  # each run's first position, then the end
        ends = balance[starts]
        unbalanced = np.zeros(len(starts), dtype=np.int64)  # each run's |h - r|, then a 0 for the empty records
        np.subtract(ends[1:], ends[:-1], out=unbalanced[:-1])
        np.abs(unbalanced, out=unbalanced)
        per_record = np.add.reduceat(unbalanced, np.searchsorted(starts, firsts[:-1]))
        per_record[empty] = 0
        out.append((entries - per_record) // 2)
    return out


def order_stats(hyp: Stream, ref: Stream, matches: list[np.ndarray]) -> np.ndarray:
    """chrF's [hyp, ref, match] per order (sacrebleu's statistics) of each record, from its two texts' lengths and
    each order's matches: a text of length L has max(L - n + 1, 0) n-grams of order n, the hypothesis's counted
    only where the reference has some. A row a record."""
    columns = []
    for n, matched in enumerate(matches, 1):
        in_ref = np.maximum(ref.lengths - (n - 1), 0)
        columns += [np.where(in_ref > 0, np.maximum(hyp.lengths - (n - 1), 0), 0), in_ref, matched]
    return np.stack(columns, axis=1)


def stacked(blocks: list[np.ndarray]) -> list[list[int]]:
    """Blocks of per-record rows side by side, as one list of Python ints a record."""
    return np.concatenate(blocks, axis=1).tolist()


def _matches(both: np.ndarray, shift: int, bounds: np.ndarray | None, records: int) -> np.ndarray:
    """Per record, the sum over its keys of min(count in hyp, count in ref), from the keys with their side bit
    (sorted here, in place). Sorted, each value's entries are one run; a key on both sides is two runs in a row,
    the hypothesis's (an even value v) and the reference's (v + 1), and the smaller run is its matches."""
    if not len(both):
        return np.zeros(records, dtype=np.int64)
    both.sort()
    change = np.empty(len(both), dtype=bool)
    change[0] = True
    np.not_equal(both[1:], both[:-1], out=change[1:])
    start = np.flatnonzero(change)
    values = both[start]
    size = np.diff(start, append=len(both))
    pair = np.flatnonzero((values[1:] - values[:-1] == 1) & (values[:-1] & 1 == 0))
    common = np.minimum(size[pair], size[pair + 1])
    keys = values[pair] >> 1
    record = keys >> shift if bounds is None else np.searchsorted(bounds, keys, side="right") - 1
    counts = np.bincount(record, minlength=records)
    more = common > 1  # most keys match once: the weighted count only for the others
    if more.any():
        counts += np.bincount(record[more], weights=common[more] - 1, minlength=records).astype(np.int64)
    return counts


def _popcount(v: np.ndarray) -> np.ndarray:
    """The set bits of each uint64 (SWAR; numpy's bitwise_count needs numpy 2, and the pyproject allows 1.26)."""
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((v * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def lcs_lengths(target: Stream, prediction: Stream, vocabulary: int, records: int) -> np.ndarray:
    """Each record's longest common subsequence of its target and prediction tokens by Hyyrö's bit-vector
    recurrence, all records at once on one uint64 each: -1 for a record outside that (an empty side, a target
    over 64 tokens or a prediction over 512, past the first 8,192 records), for the caller's own LCS."""
    out = np.full(records, -1, dtype=np.int64)
    small = ((target.lengths > 0) & (target.lengths <= _LCS_WORDS) & (prediction.lengths > 0)
             & (prediction.lengths <= _LCS_STEPS))
    small &= np.cumsum(small) <= _LCS_ROWS
    if not small.any():
        return out
    bits = _bit_length(vocabulary - 1)
    # The target's bit masks: for each (record, word), the positions of the word in the record's target.
    t_ids, t_rec, t_pos = _positions(target)
    keep = small[t_rec]
    t_key = t_rec[keep] << bits | t_ids[keep]
    t_bit = np.left_shift(np.uint64(1), t_pos[keep].astype(np.uint64))
    order = np.argsort(t_key, kind="stable")
    t_key, t_bit = t_key[order], t_bit[order]
    change = np.empty(len(t_key), dtype=bool)
    change[0] = True
    np.not_equal(t_key[1:], t_key[:-1], out=change[1:])
    start = np.flatnonzero(change)
    masks, mask_keys = np.bitwise_or.reduceat(t_bit, start), t_key[start]
    # Each prediction token's mask, in a records-by-steps matrix; a padding 0 leaves the recurrence unchanged.
    p_ids, p_rec, p_pos = _positions(prediction)
    keep = small[p_rec]
    p_key, p_rec, p_pos = p_rec[keep] << bits | p_ids[keep], p_rec[keep], p_pos[keep]
    found = np.minimum(np.searchsorted(mask_keys, p_key), len(mask_keys) - 1)
    p_mask = np.where(mask_keys[found] == p_key, masks[found], np.uint64(0))
    rows = np.flatnonzero(small)
    row_of = np.zeros(records, dtype=np.int64)
    row_of[rows] = np.arange(len(rows))
    steps = int(prediction.lengths[rows].max())
    matrix = np.zeros((steps, len(rows)), dtype=np.uint64)
    matrix[p_pos, row_of[p_rec]] = p_mask
    lengths = target.lengths[rows].astype(np.uint64)
    full = np.uint64(0xFFFFFFFFFFFFFFFF) >> (np.uint64(64) - lengths)
    v = full.copy()
    for column in matrix:
        u = v & column
        v = ((v + u) | (v - u)) & full
    out[rows] = target.lengths[rows] - _popcount(v)
    return out


def _positions(stream: Stream) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stream's tokens (SEPs dropped): their ids, records, and positions within their record's text."""
    ids, record = stream.ids[stream.token], stream.record[stream.token]
    return ids, record, np.arange(len(ids)) - (np.cumsum(stream.lengths) - stream.lengths)[record]


def _from_the_end(key: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Each entry's rank among the entries of its key, counted from the last position back (0 for the last)."""
    order = np.lexsort((-at, key))
    sorted_key = key[order]
    change = np.empty(len(key), dtype=bool)
    change[:1] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=change[1:])
    starts = np.maximum.accumulate(np.where(change, np.arange(len(key)), 0))
    rank = np.empty(len(key), dtype=np.int64)
    rank[order] = np.arange(len(key)) - starts
    return rank


def _greedy_pairs(
    hyp: tuple[np.ndarray, np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray, np.ndarray], bits: int,
) -> tuple[np.ndarray, np.ndarray]:
    """nltk METEOR's _match_enums over each record's (word, position) lists: from the last hypothesis word back,
    each takes the last unmatched equal reference word, so the k-th equal word from the end on one side pairs
    with the k-th from the end on the other. Returns the indexes (into hyp's and ref's arrays) of the pairs."""
    keys = [record << bits | ids for ids, record, _ in (hyp, ref)]
    ranked = [key << _RANK_BITS | _from_the_end(key, side[2]) for key, side in zip(keys, (hyp, ref), strict=True)]
    _, at_hyp, at_ref = np.intersect1d(ranked[0], ranked[1], assume_unique=True, return_indices=True)
    return at_hyp, at_ref


def meteor_alignments(
    hyp: Stream, ref: Stream, words: list[str], stem: Callable[[str], str], records: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each record's METEOR alignment as nltk's single_meteor_score makes it without synonyms: words matched
    exactly, then the words left matched by stem (each distinct word of the vocabulary stemmed once), greedily
    from the end; returns the matches and the chunks (runs of matches adjacent on both sides, in hypothesis
    order) a record."""
    stem_ids: dict[str, int] = {}
    stems = np.fromiter((stem_ids.setdefault(stem(word), len(stem_ids)) for word in words), np.int64, len(words))
    bits = _bit_length(max(len(words), len(stem_ids)) - 1)
    sides = [_positions(hyp), _positions(ref)]
    exact = _greedy_pairs(sides[0], sides[1], bits)
    left = []
    for side, taken in zip(sides, exact, strict=True):
        keep = np.ones(len(side[0]), dtype=bool)
        keep[taken] = False
        index = np.flatnonzero(keep)
        left.append((index, (stems[side[0][index]], side[1][index], side[2][index])))
    by_stem = _greedy_pairs(left[0][1], left[1][1], bits)
    at_hyp = np.concatenate((exact[0], left[0][0][by_stem[0]]))
    at_ref = np.concatenate((exact[1], left[1][0][by_stem[1]]))
    record, hyp_pos, ref_pos = sides[0][1][at_hyp], sides[0][2][at_hyp], sides[1][2][at_ref]
    order = np.lexsort((hyp_pos, record))
    record, hyp_pos, ref_pos = record[order], hyp_pos[order], ref_pos[order]
    matches = np.bincount(record, minlength=records)
    joined = (record[1:] == record[:-1]) & (hyp_pos[1:] == hyp_pos[:-1] + 1) & (ref_pos[1:] == ref_pos[:-1] + 1)
    breaks = np.bincount(record[1:][(record[1:] == record[:-1]) & ~joined], minlength=records)
    return matches, np.where(matches > 0, breaks + 1, 0)
