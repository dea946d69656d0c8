"""What the text pack's evaluators share: the reference texts of a record, and the Porter stemmer of nltk (the
one rouge-score and nltk's METEOR stem with), loaded only when a metric asks for stems."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from evalsi.errors import BadInputError, SkipRecord
from evalsi.packs.core.matching import reference_texts
from evalsi.records import content_text
from evalsi.v1alpha1.record_pb2 import Record

# A record's texts are bounded because these evaluators are cheap (the runner calls them on its event loop): each
# metric is linear in the texts (ROUGE-L's bit-parallel LCS in words times machine words), which at these bounds
# is at most tens of milliseconds a record (chrF over 20,000 characters, the slowest); the metrics are sentence or
# segment level, and a longer text is skipped with the reason rather than holding the loop.
MAX_CHARS = 20_000
MAX_REFERENCE_CHARS = 50_000  # all of a record's references together
MAX_REFERENCES = 64
_STEM_CACHE = 1 << 16
INSTALL_HINT = "pip install 'evalsi[text]' (it brings nltk, whose Porter stemmer this uses)"


def texts(record: Record) -> tuple[str, list[str]]:
    """The output text and the reference texts (each element of a JSON-list reference), bounded."""
    output = record.output.text or content_text(record.output)
    references, _ = reference_texts(record)
    if len(references) > MAX_REFERENCES:
        raise SkipRecord(f"{len(references)} references; at most {MAX_REFERENCES} are scored")
    longest = max(len(output), *(len(r) for r in references))
    if longest > MAX_CHARS:
        raise SkipRecord(f"a text of {longest} characters; at most {MAX_CHARS} are scored")
    together = sum(len(r) for r in references)
    if together > MAX_REFERENCE_CHARS:
        raise SkipRecord(f"references of {together} characters together; at most {MAX_REFERENCE_CHARS} are scored")
    return output, references


# A batch form (evaluator(batch=...)) tokenizes a column of texts as one string, SEP between two texts: no text
# holding it is taken, and no tokenizer's rule matches across it. The runner calls a batch form on its event loop
# for a whole chunk of records at once (evaluators._columns): it takes records while their texts total at most
# BATCH_CHARS (tens of milliseconds of tokenizing and counting), and leaves the rest to the function, whose
# calls the runner slices.
SEP = "\x00"
BATCH_CHARS = 1_000_000


def covered(outputs: Sequence[str], references: Sequence[str]) -> list[int]:
    """The indexes of the records a batch form decides: both texts non-empty, at most MAX_CHARS long, without SEP,
    in order while their texts total at most BATCH_CHARS. The function decides the rest (None): an empty text may
    be a non-text content or a JSON-list reference (its text column holds ""), and a longer one is skipped with
    the reason."""
    chosen: list[int] = []
    budget = BATCH_CHARS
    for index, (output, reference) in enumerate(zip(outputs, references, strict=True)):
        size = len(output) + len(reference)
        if output and reference and len(output) <= MAX_CHARS and len(reference) <= MAX_CHARS \
                and SEP not in output and SEP not in reference:
            budget -= size
            if budget < 0:
                break
            chosen.append(index)
    return chosen


@lru_cache(maxsize=1)
def porter_stem() -> Callable[[str], str]:
    """nltk's PorterStemmer().stem (its default NLTK_EXTENSIONS mode, as rouge-score and nltk's METEOR use it),
    memoized per word: stemming is a pure function of the word and the same words recur across records."""
    try:
        from nltk.stem.porter import PorterStemmer  # heavy optional dependency (the text extra)
    except ImportError as exc:
        raise BadInputError(f"stemming needs nltk, which is not installed: {INSTALL_HINT}") from exc
    return lru_cache(maxsize=_STEM_CACHE)(PorterStemmer().stem)


def check_stemmer(stem: bool, evaluator: str) -> None:
    """At bind time: a metric asked to stem needs nltk; the error names the evaluator and the install."""
    if not stem:
        return
    try:
        porter_stem()
    except BadInputError as exc:
        raise BadInputError(f"evaluator {evaluator}: {exc}") from None


# Dataset-scope metrics sum per-record counts, and the runner's bootstrap re-sums ~2,000 resamples of them
# (evaluators/runner.py::_run_dataset). The counts are stacked once as an integer matrix, a row a record
# (``evaluator(stack=stack_counts)``), and a resample is that matrix with a weight a row (how often the record was
# drawn, evalsi.stats.weighted): its sums are one weights-by-matrix product, exact in float64 (the counts are
# bounded by MAX_CHARS, far from 2**53 over any dataset, so any order of the additions gives the same sums). The
# matrix is float64 from the start (an integer one was converted again for every resample's product) and stored
# column by column, which BLAS multiplies by the weights about twice as fast as row by row.


def stack_counts(counts: list[list[int]]) -> Any:
    """The records' counts as one float64 matrix (whole numbers) with a weight of one a row
    (``evalsi.stats.weighted.Weighted``)."""
    import numpy as np  # numpy loads with the first corpus reduce, not with the catalog

    from evalsi.stats.weighted import ones

    return ones(np.array(counts, dtype=np.float64, order="F"), len(counts))


def summed_counts(values: Any) -> list[int]:
    """The counts summed over the records of the data (a list of counts, or the stacked matrix) or of a resample
    (the matrix weighted by draws); no record at all is a skip, since a figure of none would read as a score of 0."""
    if not values:
        raise SkipRecord("no record has both an output and a reference to score")
    if isinstance(values, list):
        return [sum(column) for column in zip(*values, strict=True)]
    if values.whole:
        return [int(total) for total in values.columns.sum(axis=0)]
    return [round(total) for total in values.weights @ values.columns]


def overlap(a: Counter[Any], b: Counter[Any]) -> int:
    """The clipped overlap of two bags, sum of min(a[g], b[g]) over what they share. Over the shared keys only
    (a C-level set intersection), and just their number when either bag holds each key once, the common case
    for word n-grams: min is then 1 for every shared key."""
    common = a.keys() & b.keys()
    if len(a) == a.total() or len(b) == b.total():
        return len(common)
    # min over the pairs of counts, mapped in C (a generator would run a Python frame per key).
    return sum(map(min, map(a.__getitem__, common), map(b.__getitem__, common)))


def list_overlap(a: list[Any], b: list[Any]) -> int:
    """``overlap`` of two n-gram lists: when either holds each n-gram once (sets as long as the lists), the size
    of the sets' intersection, without counting; else the counted bags'."""
    set_a, set_b = set(a), set(b)
    if len(set_a) == len(a) or len(set_b) == len(b):
        return len(set_a & set_b)
    return overlap(Counter(a), Counter(b))
