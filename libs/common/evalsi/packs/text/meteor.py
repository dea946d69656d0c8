"""METEOR (Lavie and Agarwal 2007) as nltk's ``meteor_score`` computes it: words lowercased, aligned by exact
match, then by Porter stem, then (only with ``synonyms``) by WordNet synonym, scored by the harmonic mean of
precision and recall (alpha) less the fragmentation penalty (beta, gamma); the best reference counts. Equal to
nltk's on the same word lists (tests/packs/test_text_meteor.py).

The synonym stage needs WordNet, which nltk does not ship: it is read only from a ``wordnet`` corpus already
installed where nltk looks (``nltk.data.path``), never downloaded; a run asking for synonyms without it is
refused when the evaluator is bound. Without synonyms the figure is nltk's with a WordNet that has none."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import chain, pairwise
from typing import Any, Literal, Protocol

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.text._common import SEP, check_stemmer, covered, porter_stem, texts
from evalsi.packs.text.bleu import joined_tokens as bleu_joined_tokens
from evalsi.packs.text.bleu import tokens as bleu_tokens
from evalsi.v1alpha1.record_pb2 import Record

Enum = list[tuple[int, str]]
Tokenize = Literal["whitespace", "13a"]


class WordNet(Protocol):
    """What the synonym stage reads of nltk's WordNetCorpusReader."""

    def synsets(self, lemma: str) -> Iterable[Any]: ...


def _match(hypothesis: Enum, reference: Enum) -> tuple[list[tuple[int, int]], Enum, Enum]:
    """nltk's _match_enums: from the last hypothesis word back, each takes the last unmatched equal reference
    word; returns the (hypothesis, reference) index pairs and what stays unmatched on each side."""
    positions: defaultdict[str, list[int]] = defaultdict(list)
    for j, (_, word) in enumerate(reference):
        positions[word].append(j)
    pairs = []
    hyp_taken: set[int] = set()
    ref_taken: set[int] = set()
    for i in range(len(hypothesis) - 1, -1, -1):
        found = positions.get(hypothesis[i][1])
        if found:
            j = found.pop()
            hyp_taken.add(i)
            ref_taken.add(j)
            pairs.append((hypothesis[i][0], reference[j][0]))
    return (pairs, [p for i, p in enumerate(hypothesis) if i not in hyp_taken],
            [p for j, p in enumerate(reference) if j not in ref_taken])


def _synonym_match(hypothesis: Enum, reference: Enum, wordnet: WordNet) -> list[tuple[int, int]]:
    """nltk's _enum_wordnetsyn_match: a hypothesis word (from the last) matches the last unmatched reference word
    that is it or one of its WordNet lemmas without an underscore."""
    positions: defaultdict[str, list[int]] = defaultdict(list)
    for j, (_, word) in enumerate(reference):
        positions[word].append(j)
    pairs = []
    for i in range(len(hypothesis) - 1, -1, -1):
        word = hypothesis[i][1]
        synonyms = set(chain.from_iterable(
            (lemma.name() for lemma in synset.lemmas() if lemma.name().find("_") < 0)
            for synset in wordnet.synsets(word)
        )).union({word})
        best_j, best_word = -1, None
        for synonym in synonyms:
            found = positions.get(synonym)
            if found and found[-1] > best_j:
                best_j, best_word = found[-1], synonym
        if best_word is not None:
            positions[best_word].pop()
            pairs.append((hypothesis[i][0], reference[best_j][0]))
    return pairs


def _chunks(pairs: list[tuple[int, int]]) -> int:
    """The fewest runs of matches adjacent in both texts (nltk's _count_chunks)."""
    return 1 + sum(1 for a, b in pairwise(pairs) if not (b[0] == a[0] + 1 and b[1] == a[1] + 1))


def single_meteor(
    reference: list[str], hypothesis: list[str], *, alpha: float, beta: float, gamma: float,
    wordnet: WordNet | None,
) -> float:
    """nltk's single_meteor_score on word lists (lowercased here, as its default preprocess does)."""
    hyp: Enum = list(enumerate(w.lower() for w in hypothesis))
    ref: Enum = list(enumerate(w.lower() for w in reference))
    if not hyp or not ref:
        return 0.0
    exact, hyp_left, ref_left = _match(hyp, ref)
    stem = porter_stem()
    stemmed, hyp_left, ref_left = _match([(i, stem(w)) for i, w in hyp_left], [(j, stem(w)) for j, w in ref_left])
    synonyms = _synonym_match(hyp_left, ref_left, wordnet) if wordnet is not None else []
    pairs = sorted(exact + stemmed + synonyms, key=lambda pair: pair[0])
    if not pairs:
        return 0.0
    return _scored(len(pairs), len(hyp), len(ref), _chunks(pairs), alpha, beta, gamma)


def _scored(matched: int, hyp_len: int, ref_len: int, chunks: int, alpha: float, beta: float, gamma: float) -> float:
    """nltk's score of an alignment with ``matched`` (at least one) pairs in ``chunks`` chunks."""
    precision = float(matched) / hyp_len
    recall = float(matched) / ref_len
    fmean = (precision * recall) / (alpha * precision + (1 - alpha) * recall)
    fragmentation = float(chunks) / matched
    return (1 - gamma * fragmentation**beta) * fmean


@lru_cache(maxsize=1)
def local_wordnet() -> WordNet:
    """nltk's WordNet reader over a corpus installed locally; refused (never downloaded) when there is none."""
    check_stemmer(True, "builtin/meteor")
    import nltk  # heavy optional dependency (the text extra), loaded with the stemmer already

    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        try:
            nltk.data.find("corpora/wordnet.zip")
        except LookupError:
            raise BadInputError(
                "evaluator builtin/meteor: param 'synonyms' needs the WordNet corpus installed locally for nltk "
                f"(looked in {', '.join(nltk.data.path)}); it is never downloaded at run time. Install it "
                "there, or set synonyms false for exact and stem matching only"
            ) from None
    from nltk.corpus import wordnet

    wordnet.ensure_loaded()
    return wordnet


_SPLIT: dict[str, Callable[[str], list[str]]] = {
    "whitespace": str.split,
    "13a": lambda text: bleu_tokens(text, "13a", False),
}


def _joined_words(texts: list[str], tokenize: str) -> list[str]:
    """Every text's words (``_SPLIT``) lowercased, SEP between two texts' words: one split of the texts joined by
    " SEP " (each word lowercased alone, as single_meteor does)."""
    words = bleu_joined_tokens(texts, "13a", False) if tokenize == "13a" else f" {SEP} ".join(texts).split()
    return list(map(str.lower, words))


def meteor_batch(
    texts: dict[str, list[str]], *, tokenize: str = "whitespace", synonyms: bool = False, alpha: float = 0.9,
    beta: float = 3.0, gamma: float = 0.5,
) -> BatchVerdicts:
    """``meteor`` of every record the batch path covers (``covered``: one reference, both texts present) without
    synonyms: each record's exact and stem alignment made for all of them at once (``_ngrams``), each distinct
    word stemmed once, scored by ``_scored``; None for the rest, and for all with synonyms (WordNet's lookups)."""
    from evalsi.packs.text import _ngrams  # numpy: loaded by the first batch, not by the catalog

    outputs, references = texts["output"], texts["reference"]
    decided: BatchVerdicts = [None] * len(outputs)
    chosen = [] if synonyms else covered(outputs, references)
    if not chosen:
        return decided
    hyp, ref, words = _ngrams.word_streams(_joined_words([outputs[i] for i in chosen], tokenize),
                                           _joined_words([references[i] for i in chosen], tokenize), len(chosen))
    matches, chunks = _ngrams.meteor_alignments(hyp, ref, words, porter_stem(), len(chosen))
    for index, matched, hyp_len, ref_len, runs in zip(chosen, matches.tolist(), hyp.lengths.tolist(),
                                                      ref.lengths.tolist(), chunks.tolist(), strict=True):
        decided[index] = _scored(matched, hyp_len, ref_len, runs, alpha, beta, gamma) if matched else 0.0
    return decided


def _check(*, alpha: float = 0.9, beta: float = 3.0, gamma: float = 0.5, synonyms: bool = False, **_: object) -> None:
    check_stemmer(True, "builtin/meteor")
    if not 0.0 < alpha < 1.0:
        raise BadInputError(f"evaluator builtin/meteor: param 'alpha' must be in (0, 1), got {alpha}")
    if not 0.0 <= gamma <= 1.0:
        raise BadInputError(f"evaluator builtin/meteor: param 'gamma' must be in [0, 1], got {gamma}")
    if not 0.0 <= beta <= 100.0:
        raise BadInputError(f"evaluator builtin/meteor: param 'beta' must be in [0, 100], got {beta}")
    if synonyms:
        local_wordnet()


@evaluator(
    "builtin/meteor",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the words (stems memoized); texts are bounded. Synonyms read WordNet: see synonyms
    check=_check,
    batch=meteor_batch,
    outputs=[Output("meteor", "number", min=0.0, max=1.0,
                    description="METEOR (nltk's): exact and stem matches (and WordNet synonyms if asked), the "
                    "best reference.")],
    params={
        "tokenize": "How texts become words: whitespace (str.split, as when nltk's meteor_score is given "
        "split texts) or 13a (sacrebleu's 13a tokenizer, punctuation apart).",
        "synonyms": "Also match WordNet synonyms, as nltk does by default: needs the wordnet corpus installed "
        "locally for nltk (never downloaded); refused without it.",
        "alpha": "Precision's weight against recall in the harmonic mean (nltk's 0.9).",
        "beta": "The fragmentation penalty's exponent (nltk's 3).",
        "gamma": "The fragmentation penalty's weight (nltk's 0.5).",
    },
)
def meteor(
    record: Record, *, tokenize: Tokenize = "whitespace", synonyms: bool = False, alpha: float = 0.9,
    beta: float = 3.0, gamma: float = 0.5,
) -> float:
    """METEOR of the output against the reference (the best of a JSON-list reference's elements), equal to
    nltk.translate.meteor_score.meteor_score on the same word lists."""
    output, references = texts(record)
    split = _SPLIT[tokenize]
    wordnet = local_wordnet() if synonyms else None
    hypothesis = split(output)
    return max(single_meteor(split(reference), hypothesis, alpha=alpha, beta=beta, gamma=gamma, wordnet=wordnet)
               for reference in references)


EVALUATORS = (meteor,)
