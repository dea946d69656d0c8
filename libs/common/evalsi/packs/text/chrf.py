"""chrF and chrF++ (Popović 2015, 2017) as sacrebleu computes them: character n-grams (whitespace removed) and,
for chrF++, word n-grams with sacrebleu's punctuation split; per record ``sentence_chrf`` (the best reference
by F-score) and over the dataset ``corpus_chrf``, equal to sacrebleu's (tests/packs/test_text_chrf.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.text._common import SEP, covered, overlap, summed_counts, texts
from evalsi.v1alpha1.record_pb2 import Record

_PUNCTS = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_EPS = 1e-16
MAX_CHAR_ORDER = 10
MAX_WORD_ORDER = 4


def _words(text: str) -> list[str]:
    """sacrebleu CHRF._remove_punctuation: one punctuation mark split off a word's end, else off its start."""
    words: list[str] = []
    for word in text.split():
        if len(word) == 1:
            words.append(word)
        elif word[-1] in _PUNCTS:
            words += [word[:-1], word[-1]]
        elif word[0] in _PUNCTS:
            words += [word[0], word[1:]]
        else:
            words.append(word)
    return words


def _ngrams(text: str, char_order: int, word_order: int, whitespace: bool) -> list[Counter[Any]]:
    """Character n-gram counts of orders 1 to char_order, then word n-gram counts of orders 1 to word_order. A
    character n-gram is counted as the tuple of its characters (zip runs in C, slicing each one does not); the
    counts are the same as of sacrebleu's substrings."""
    chars = text if whitespace else "".join(text.split())
    grams: list[Counter[Any]] = [Counter(chars)]
    grams += [Counter(zip(*(chars[i:] for i in range(n)), strict=False)) for n in range(2, char_order + 1)]
    if word_order:
        words = _words(text)
        grams += [Counter([" ".join(words[i:i + n]) for i in range(len(words) - n + 1)])
                  for n in range(1, word_order + 1)]
    return grams


def f_score(stats: list[int], order: int, beta: float) -> float:
    """sacrebleu CHRF._compute_f_score without eps smoothing (its default): the F-beta of the precision and
    recall averaged over the orders both sides have n-grams of, on the 0-100 scale."""
    factor = beta**2
    avg_prec = avg_rec = 0.0
    effective_order = 0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i: 3 * i + 3]
        if n_hyp > 0 and n_ref > 0:
            avg_prec += n_match / n_hyp
            avg_rec += n_match / n_ref
            effective_order += 1
    if effective_order == 0:
        return 0.0
    avg_prec /= effective_order
    avg_rec /= effective_order
    if avg_prec + avg_rec:
        score = (1 + factor) * avg_prec * avg_rec
        score /= (factor * avg_prec) + avg_rec
        return 100 * score
    return 0.0


def segment_stats(
    hypothesis: str, references: list[str], *, char_order: int, word_order: int, beta: float, lowercase: bool,
    whitespace: bool,
) -> list[int]:
    """[hyp, ref, match] counts per order against the reference with the best F-score (the first on a tie)."""
    if lowercase:
        hypothesis = hypothesis.lower()
        references = [r.lower() for r in references]
    order = char_order + word_order
    hyp_grams = _ngrams(hypothesis, char_order, word_order, whitespace)
    best: list[int] = []
    best_f = -1.0
    for reference in references:
        stats: list[int] = []
        for hyp, ref in zip(hyp_grams, _ngrams(reference, char_order, word_order, whitespace), strict=True):
            stats += [hyp.total() if ref else 0, ref.total(), overlap(hyp, ref)]
        score = f_score(stats, order, beta)
        if score > best_f:
            best_f, best = score, stats
    return best


def _joined_words(texts: list[str]) -> list[str]:
    """``_words`` of every text in turn, SEP between two texts' words."""
    out: list[str] = []
    for index, text in enumerate(texts):
        if index:
            out.append(SEP)
        out += _words(text)
    return out


def _batch_stats(
    texts: dict[str, list[str]], *, char_order: int, word_order: int, lowercase: bool, whitespace: bool,
) -> tuple[list[int], list[list[int]]]:
    """``segment_stats`` of every record the batch path covers (``covered``: one reference, both texts present),
    the character (and word) n-gram matches counted for all of them at once (``_ngrams``): the records' indexes
    and their stats."""
    from evalsi.packs.text import _ngrams  # numpy: loaded by the first batch, not by the catalog

    outputs, references = texts["output"], texts["reference"]
    chosen = covered(outputs, references)
    if not chosen:
        return chosen, []
    records = len(chosen)
    sides = [[outputs[i] for i in chosen], [references[i] for i in chosen]]
    if lowercase:
        sides = [list(map(str.lower, side)) for side in sides]
    # Whitespace removed from the joined texts is removed from each (SEP is not whitespace).
    hyp_chars, ref_chars = (SEP.join(side) if whitespace else "".join(SEP.join(side).split()) for side in sides)
    hyp, ref, size = _ngrams.char_streams(hyp_chars, ref_chars, records)
    stats = [_ngrams.order_stats(hyp, ref, _ngrams.clipped_matches(hyp, ref, size, records, char_order))]
    if word_order:
        hyp_words, ref_words, vocabulary = _ngrams.word_streams(_joined_words(sides[0]), _joined_words(sides[1]),
                                                                records)
        matched = _ngrams.clipped_matches(hyp_words, ref_words, len(vocabulary), records, word_order)
        stats.append(_ngrams.order_stats(hyp_words, ref_words, matched))
    return chosen, _ngrams.stacked(stats)


def chrf_batch(
    texts: dict[str, list[str]], *, char_order: int = 6, word_order: int = 0, beta: float = 2.0,
    lowercase: bool = False, whitespace: bool = False,
) -> BatchVerdicts:
    """``chrf`` of every record the batch path covers (``_batch_stats``), scored by ``f_score``; None for the
    rest, which the function decides."""
    decided: BatchVerdicts = [None] * len(texts["output"])
    chosen, rows = _batch_stats(texts, char_order=char_order, word_order=word_order, lowercase=lowercase,
                                whitespace=whitespace)
    for index, row in zip(chosen, rows, strict=True):
        decided[index] = f_score(row, char_order + word_order, beta)
    return decided


def _corpus_batch(
    texts: dict[str, list[str]], *, char_order: int = 6, word_order: int = 0, beta: float = 2.0,
    lowercase: bool = False, whitespace: bool = False,
) -> list[list[int] | None]:
    """corpus-chrf's mapper (``segment_stats``) for every record the batch path covers; None for the rest."""
    mapped: list[list[int] | None] = [None] * len(texts["output"])
    chosen, rows = _batch_stats(texts, char_order=char_order, word_order=word_order, lowercase=lowercase,
                                whitespace=whitespace)
    for index, row in zip(chosen, rows, strict=True):
        mapped[index] = row
    return mapped


def _stack(rows: list[list[int]]) -> Any:
    """corpus-chrf's counts stacked for its bootstrap (``_exact_counts``: float32 sums where exact). A text of L
    characters (or words) has L - n + 1 n-grams of order n, so each order's hypothesis and reference n-grams are
    the previous order's less one wherever both texts are that long: declared as steps, which leaves the resample's
    product the first order's two columns and the matches (8 columns of chrF's 18)."""
    from evalsi.packs.text._exact_counts import stack_exact  # numpy: loaded by the first corpus reduce

    orders = len(rows[0]) // 3 if rows else 0
    return stack_exact(rows, [(3 * n + side, 3 * (n - 1) + side, 1) for n in range(1, orders) for side in (0, 1)])


def _summed(stats: Any) -> list[int]:
    """The counts summed over the records: of a list of counts (``summed_counts``), or of the stacked data or
    a resample of it (``_stack``)."""
    return summed_counts(stats) if isinstance(stats, list) else stats.sums()


def _check_for(name: str) -> Callable[..., None]:
    def check(*, char_order: int = 6, word_order: int = 0, beta: float = 2.0, **_: object) -> None:
        if not 1 <= char_order <= MAX_CHAR_ORDER:
            raise BadInputError(f"evaluator {name}: param 'char_order' must be 1 to {MAX_CHAR_ORDER}, got {char_order}")
        if not 0 <= word_order <= MAX_WORD_ORDER:
            raise BadInputError(f"evaluator {name}: param 'word_order' must be 0 to {MAX_WORD_ORDER} (2 is chrF++), "
                                f"got {word_order}")
        if not 0 < beta <= 100:
            raise BadInputError(f"evaluator {name}: param 'beta' must be in (0, 100], got {beta}")

    return check


_PARAMS = {
    "char_order": "Character n-gram orders 1 to char_order (sacrebleu's default 6).",
    "word_order": "Word n-gram orders 1 to word_order added to the character ones: 0 is chrF, 2 is chrF++.",
    "beta": "Recall's weight against precision in the F-score (2: recall twice as important).",
    "lowercase": "Lowercase both texts first (case-insensitive chrF).",
    "whitespace": "Keep whitespace inside character n-grams (sacrebleu removes it by default).",
}


def _stats(
    record: Record, *, char_order: int = 6, word_order: int = 0, beta: float = 2.0, lowercase: bool = False,
    whitespace: bool = False,
) -> list[int]:
    output, references = texts(record)
    return segment_stats(output, references, char_order=char_order, word_order=word_order, beta=beta,
                         lowercase=lowercase, whitespace=whitespace)


@evaluator(
    "builtin/chrf",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the texts times the orders; texts are bounded (_common.MAX_CHARS)
    check=_check_for("builtin/chrf"),
    batch=chrf_batch,
    outputs=[Output("chrf", "number", min=0.0, max=100.0,
                    description="Sentence chrF (chrF++ with word_order 2) on sacrebleu's 0-100 scale; the best "
                    "reference counts.")],
    params=_PARAMS,
)
def chrf(
    record: Record, *, char_order: int = 6, word_order: int = 0, beta: float = 2.0, lowercase: bool = False,
    whitespace: bool = False,
) -> float:
    """Sentence chrF of the output against the reference (or the best of a JSON-list reference's elements), equal
    to sacrebleu's CHRF(...).sentence_score."""
    output, references = texts(record)
    stats = segment_stats(output, references, char_order=char_order, word_order=word_order, beta=beta,
                          lowercase=lowercase, whitespace=whitespace)
    return f_score(stats, char_order + word_order, beta)


@evaluator(
    "builtin/corpus-chrf",
    version="1.0.0",
    pack="text",
    scope="dataset",
    requires=["output", "reference"],
    mapper=_stats,
    map_batch=_corpus_batch,
    stack=_stack,
    check=_check_for("builtin/corpus-chrf"),
    outputs=[Output("chrf", "number", min=0.0, max=100.0,
                    description="Corpus chrF on sacrebleu's 0-100 scale: n-gram counts summed over the records, "
                    "then one F-score.")],
    params=_PARAMS,
)
def corpus_chrf(
    stats: Any, *, char_order: int = 6, word_order: int = 0, beta: float = 2.0, lowercase: bool = False,
    whitespace: bool = False,
) -> float:
    """Corpus chrF over the dataset, equal to sacrebleu's CHRF(...).corpus_score."""
    return f_score(_summed(stats), char_order + word_order, beta)


EVALUATORS = (chrf, corpus_chrf)
