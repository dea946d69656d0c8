"""chrF's batch counts (packs/text/_ngrams.py): the one-sort clipped matches, read from the runs of neighbouring
keys and a running balance per record, equal Counter's on character texts with empty ones first, between and last
(a record of no character at all, as a whitespace-only text leaves), and a whole batch equals the per-record
``segment_stats``."""

from __future__ import annotations

import random
from collections import Counter

from evalsi.packs.text import _ngrams
from evalsi.packs.text._common import SEP
from evalsi.packs.text.chrf import _corpus_batch, segment_stats


def _grams(text: str, n: int) -> Counter[str]:
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def test_one_sort_matches_equal_counters_with_empty_records() -> None:
    rng = random.Random(11)
    for alphabet, records in (("ab", 40), ("abcde", 300), ("the quick fox", 7), ("aé日x", 2), ("ab", 1)):
        hyps = ["".join(rng.choice(alphabet) for _ in range(rng.choice((0, 1, 5, 30)))) for _ in range(records)]
        refs = [h if rng.random() < 0.3 else "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
                for h in hyps]
        hyps[0] = refs[0] = hyps[-1] = refs[-1] = ""  # records of no character on either side
        hyp, ref, size = _ngrams.char_streams(SEP.join(hyps), SEP.join(refs), records)
        matched = _ngrams.clipped_matches(hyp, ref, size, records, 6)
        for n in range(1, 7):
            assert matched[n - 1].tolist() == [(_grams(h, n) & _grams(r, n)).total() for h, r in zip(hyps, refs,
                                                                                                    strict=True)]


def test_batch_counts_with_whitespace_only_texts_equal_segment_stats() -> None:
    outputs = ["   ", "the cat sat.", "a", " \t ", "dogs and cats, again", "x y z", " "]
    references = [" \n", "the cat sat on it.", "  ", "ab", "dogs, and cats again!", "xyz", "  "]
    for params in ({}, {"word_order": 2}, {"whitespace": True, "lowercase": True}):
        mapped = _corpus_batch({"output": outputs, "reference": references}, **params)
        for output, reference, row in zip(outputs, references, mapped, strict=True):
            assert row == segment_stats(output, [reference], char_order=6, word_order=params.get("word_order", 0),
                                        beta=2.0, lowercase=bool(params.get("lowercase")),
                                        whitespace=bool(params.get("whitespace")))
