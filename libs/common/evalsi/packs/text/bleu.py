"""BLEU (Papineni et al. 2002) as sacrebleu computes it: ``sentence_bleu`` per record and ``corpus_bleu`` over
the dataset, with sacrebleu's tokenizers (13a, zh, intl, none, char), smoothing methods and multi-reference rules,
so every figure equals sacrebleu's on the same texts (tests/packs/test_text_bleu.py and
test_text_bleu_languages.py hold it to that)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Any, Literal

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.text._common import SEP, covered, list_overlap, overlap, stack_counts, summed_counts, texts
from evalsi.packs.text._language_tokenizers import check_intl, intl_spaced, zh_spaced
from evalsi.v1alpha1.record_pb2 import Record

MAX_ORDER = 4
Tokenize = Literal["13a", "none", "char", "zh", "intl"]
Smooth = Literal["exp", "floor", "add-k", "none"]
_SMOOTH_DEFAULTS: dict[str, float] = {"floor": 0.1, "add-k": 1.0}
# sacrebleu's my_log: log(0) floored, so a zero precision drives the score to 0 rather than raising.
_LOG_ZERO = -9999999999
# mteval-v13a's language-dependent rules, as sacrebleu's TokenizerRegexp applies them, in this order; each
# replacement is a function rather than a template, whose expansion costs more than the match. The period, comma
# and dash rules run only when their character is there (a sub without a match returns the text unchanged).
# sacrebleu's first rule also spaces out the space itself (its class starts at " "): that only lengthens runs of
# spaces, which change no later match (a space takes part in one only as the one character before a period or
# comma, or after one, whatever the run's length) and which the final split collapses, so it is left out.
_13A_SYMBOL = re.compile(r"[\{-\~\[-\`!-\&\(-\+\:-\@\/]")
# sacrebleu's rule ([^0-9])([\.,]) -> "\1 \2 " tries its non-digit at every character (most of 13a's time). It is
# applied instead from the periods and commas themselves (searches that start on them): a lone one after a
# non-digit is spaced out by a literal replacement, and a run of several, rare, a run at a time
# (_period_comma_after; tests/packs/test_text_batch.py holds it equal to the regex).
_13A_LONE_PERIOD = re.compile(r"\.(?<=[^0-9.,]\.)(?![.,])")
_13A_LONE_COMMA = re.compile(r",(?<=[^0-9.,],)(?![.,])")
_13A_PERIOD_COMMA_RUN = re.compile(r"[\.,]{2,}")
_13A_PERIOD_COMMA_BEFORE = re.compile(r"([\.,])([^0-9])")
_13A_DASH = re.compile(r"([0-9])(-)")


def _spaced(match: re.Match[str]) -> str:
    return f" {match[0]} "


def _split_after(match: re.Match[str]) -> str:
    return f"{match[1]} {match[2]} "


def _split_after_run(match: re.Match[str]) -> str:
    """sacrebleu's first period and comma rule (a non-digit x, then a period or comma y: "x y ") over one maximal
    run of periods and commas. Its matches, left to right without overlap, pair the run's characters: the character
    before the run (never a period or comma, the run being maximal, so never taken by an earlier match) pairs
    with the run's first when it is not a digit, then each next two pair up; an odd last one stays. No match
    reaches past the run: the character after it is no period or comma."""
    run, start = match[0], match.start()
    head = ""
    if start and not "0" <= match.string[start - 1] <= "9":
        head, run = f" {run[0]} ", run[1:]
    pairs = "".join(f"{run[i]} {run[i + 1]} " for i in range(0, len(run) - 1, 2))
    return head + pairs + run[-1] if len(run) % 2 else head + pairs


def period_comma_after(line: str) -> str:
    """sacrebleu's ([^0-9])([\\.,]) -> "\\1 \\2 " on ``line``: a lone period or comma (no other next to it) after a
    non-digit becomes " . " (" , "); runs of several go through _split_after_run. The two kinds never touch:
    a lone one's neighbours are no periods or commas, and a run's first neighbour is left as it is."""
    line = _13A_LONE_COMMA.sub(" , ", _13A_LONE_PERIOD.sub(" . ", line))
    if ".." in line or ".," in line or ",." in line or ",," in line:
        line = _13A_PERIOD_COMMA_RUN.sub(_split_after_run, line)
    return line


def _split_before(match: re.Match[str]) -> str:
    return f" {match[1]} {match[2]}"


_CACHE = 1 << 16


def _13a_spaced(line: str) -> str:
    """mteval-v13a on ``line``, its tokens separated by runs of whitespace (the split is the caller's)."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return _regexp_spaced(f" {line} ")


def _regexp_spaced(line: str) -> str:
    """sacrebleu's TokenizerRegexp (13a's rules, which its zh tokenizer applies too) before the final split."""
    line = _13A_SYMBOL.sub(_spaced, line)
    if "." in line or "," in line:
        line = _13A_PERIOD_COMMA_BEFORE.sub(_split_before, period_comma_after(line))
    if "-" in line:
        line = _13A_DASH.sub(_split_after, line)
    return line


def _13a(line: str) -> str:
    return " ".join(_13a_spaced(line).split())


_tokenize_13a = lru_cache(maxsize=_CACHE)(_13a)


def _tokenize_char(line: str) -> str:
    return " ".join(line)


def _tokenize_none(line: str) -> str:
    return line


def _tokenize_zh(line: str) -> str:
    return " ".join(zh_spaced(line, _regexp_spaced).split())


def _tokenize_intl(line: str) -> str:
    return " ".join(intl_spaced(line).split())


_TOKENIZERS: dict[str, Callable[[str], str]] = {
    "13a": _tokenize_13a, "none": _tokenize_none, "char": _tokenize_char,
    "zh": lru_cache(maxsize=_CACHE)(_tokenize_zh), "intl": lru_cache(maxsize=_CACHE)(_tokenize_intl)}
# Tokenizers whose rules read the start and end of a text (zh strips it, intl has no padding): a column of texts
# joined by " SEP " is tokenized a text at a time rather than as one string.
_BY_TEXT = frozenset({"zh", "intl"})


def tokens(text: str, tokenize: str, lowercase: bool) -> list[str]:
    """sacrebleu's preprocessing of a segment (lowercased if asked, right-stripped, tokenized), split into words."""
    if lowercase:
        text = text.lower()
    return _TOKENIZERS[tokenize](text.rstrip()).split()


def joined_tokens(texts: list[str], tokenize: str, lowercase: bool) -> list[str]:
    """``tokens`` of every text in turn, SEP between two texts' tokens, from one pass over the texts joined by
    " SEP ": every step of the tokenizers (the replacements, the 13a rules' one-character contexts, the split)
    acts within a text and never across the separator, whose spaces are the ones 13a pads each text with."""
    if lowercase:
        texts = list(map(str.lower, texts))
    if tokenize in _BY_TEXT:
        tokenizer = _TOKENIZERS[tokenize]
        return f" {SEP} ".join(tokenizer(text.rstrip()) for text in texts).split()
    joined = f" {SEP} ".join(map(str.rstrip, texts))
    return (_13a_spaced if tokenize == "13a" else _TOKENIZERS[tokenize])(joined).split()


def _gram_lists(words: list[str]) -> list[list[Any]]:
    """The word n-grams of orders 1 to 4, one list per order (unigrams as words, the others as tuples)."""
    return [words, list(pairwise(words)), list(zip(words, words[1:], words[2:], strict=False)),
            list(zip(words, words[1:], words[2:], words[3:], strict=False))]


def _closest_length(hyp_len: int, ref_lens: list[int]) -> int:
    """The reference length closest to the hypothesis's; the shorter one on a tie (sacrebleu's rule)."""
    return min(ref_lens, key=lambda length: (abs(hyp_len - length), length))


def segment_stats(hypothesis: str, references: list[str], tokenize: str, lowercase: bool) -> list[int]:
    """One segment's sufficient statistics: [hyp_len, ref_len, correct_1..4, total_1..4], each reference n-gram's
    count being its highest count in any one reference."""
    words = tokens(hypothesis, tokenize, lowercase)
    hyp_grams = _gram_lists(words)
    if len(references) == 1:  # the common case: no merging, and sets where the n-grams do not repeat
        ref_words = tokens(references[0], tokenize, lowercase)
        ref_lens = [len(ref_words)]
        correct = [list_overlap(h, r) for h, r in zip(hyp_grams, _gram_lists(ref_words), strict=True)]
    else:
        ref_counts: list[Counter[Any]] = []
        ref_lens = []
        for reference in references:
            ref_words = tokens(reference, tokenize, lowercase)
            ref_lens.append(len(ref_words))
            counted = [Counter(grams) for grams in _gram_lists(ref_words)]
            if not ref_counts:
                ref_counts = counted
                continue
            for merged, counts in zip(ref_counts, counted, strict=True):
                for gram, count in counts.items():
                    if count > merged[gram]:
                        merged[gram] = count
        correct = [overlap(Counter(h), ref) for h, ref in zip(hyp_grams, ref_counts, strict=True)]
    total = [max(len(words) - order, 0) for order in range(MAX_ORDER)]
    return [len(words), _closest_length(len(words), ref_lens), *correct, *total]


def compute_bleu(
    correct: Sequence[float], total: Sequence[float], sys_len: int, ref_len: int, smooth_method: str,
    smooth_value: float | None, effective_order: bool,
) -> float:
    """sacrebleu's BLEU.compute_bleu on the statistics, step for step so the floats are the same."""
    value = _SMOOTH_DEFAULTS.get(smooth_method, 0.0) if smooth_value is None else smooth_value
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    precisions = [0.0] * MAX_ORDER
    if not any(correct):
        return 0.0
    correct, total = [float(c) for c in correct], [float(t) for t in total]
    smooth_mteval = 1.0
    eff_order = MAX_ORDER
    for n in range(1, MAX_ORDER + 1):
        if smooth_method == "add-k" and n > 1:
            correct[n - 1] += value
            total[n - 1] += value
        if total[n - 1] == 0:
            break
        if effective_order:
            eff_order = n
        if correct[n - 1] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1])
            elif smooth_method == "floor":
                precisions[n - 1] = 100.0 * value / total[n - 1]
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    return bp * math.exp(sum([math.log(p) if p != 0.0 else _LOG_ZERO for p in precisions[:eff_order]]) / eff_order)


def sentence_bleu(
    hypothesis: str, references: list[str], *, tokenize: str = "13a", smooth_method: str = "exp",
    smooth_value: float | None = None, lowercase: bool = False,
) -> float:
    """sacrebleu.sentence_bleu(hypothesis, references, ...).score (effective order on, as there)."""
    stats = segment_stats(hypothesis, references, tokenize, lowercase)
    return compute_bleu(stats[2:6], stats[6:], stats[0], stats[1], smooth_method, smooth_value, True)


def _batch_stats(texts: dict[str, list[str]], tokenize: str, lowercase: bool) -> tuple[list[int], list[list[int]]]:
    """``segment_stats`` of every record the batch path covers (``covered``: one reference, both texts present),
    their n-gram matches counted for all of them at once (``_ngrams``): the records' indexes and their stats."""
    from evalsi.packs.text import _ngrams  # numpy: loaded by the first batch, not by the catalog

    outputs, references = texts["output"], texts["reference"]
    chosen = covered(outputs, references)
    if not chosen:
        return chosen, []
    hyp, ref, words = _ngrams.word_streams(joined_tokens([outputs[i] for i in chosen], tokenize, lowercase),
                                          joined_tokens([references[i] for i in chosen], tokenize, lowercase),
                                          len(chosen))
    orders = _ngrams.clipped_matches(hyp, ref, len(words), len(chosen), MAX_ORDER)
    correct = [counts.tolist() for counts in orders]
    stats = [[hyp_len, ref_len, *matched, *(max(hyp_len - order, 0) for order in range(MAX_ORDER))]
             for hyp_len, ref_len, *matched in zip(hyp.lengths.tolist(), ref.lengths.tolist(), *correct, strict=True)]
    return chosen, stats


def bleu_batch(
    texts: dict[str, list[str]], *, tokenize: str = "13a", smooth_method: str = "exp",
    smooth_value: float | None = None, lowercase: bool = False,
) -> BatchVerdicts:
    """``bleu`` of every record the batch path covers (``_batch_stats``), scored by ``compute_bleu``; None for the
    rest, which the function decides."""
    decided: BatchVerdicts = [None] * len(texts["output"])
    for index, stats in zip(*_batch_stats(texts, tokenize, lowercase), strict=True):
        decided[index] = compute_bleu(stats[2:6], stats[6:], stats[0], stats[1], smooth_method, smooth_value, True)
    return decided


def _corpus_batch(
    texts: dict[str, list[str]], *, tokenize: str = "13a", smooth_method: str = "exp",
    smooth_value: float | None = None, lowercase: bool = False,
) -> list[list[int] | None]:
    """corpus-bleu's mapper (``segment_stats``) for every record the batch path covers; None for the rest."""
    mapped: list[list[int] | None] = [None] * len(texts["output"])
    for index, stats in zip(*_batch_stats(texts, tokenize, lowercase), strict=True):
        mapped[index] = stats
    return mapped


def _check_for(name: str) -> Callable[..., None]:
    def check(*, tokenize: str = "13a", smooth_method: str = "exp", smooth_value: float | None = None,
              **_: object) -> None:
        if tokenize == "intl":
            try:
                check_intl()
            except BadInputError as exc:
                raise BadInputError(f"evaluator {name}: {exc}") from None
        if smooth_value is None:
            return
        if smooth_method not in _SMOOTH_DEFAULTS:
            raise BadInputError(f"evaluator {name}: param 'smooth_value' applies to smooth_method floor or add-k, "
                                f"not {smooth_method!r}")
        if not 0.0 < smooth_value <= 100.0:
            raise BadInputError(f"evaluator {name}: param 'smooth_value' must be in (0, 100], got {smooth_value}")

    return check


_PARAMS = {
    "tokenize": "sacrebleu's tokenizer: 13a (mteval-v13a, the WMT default), zh (Chinese characters apart, then "
    "13a's rules), intl (mteval-v14's international tokenization; needs the text extra), char (every character a "
    "token) or none (the texts are already tokenized, split on whitespace).",
    "smooth_method": "sacrebleu's smoothing for n-gram orders without a match: exp (NIST's, the default), floor, "
    "add-k or none.",
    "smooth_value": "The constant of floor (default 0.1) or add-k (default 1); unset takes sacrebleu's default.",
    "lowercase": "Lowercase both texts before tokenizing (case-insensitive BLEU).",
}


@evaluator(
    "builtin/bleu",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the texts, which are bounded (_common.MAX_CHARS)
    check=_check_for("builtin/bleu"),
    batch=bleu_batch,
    outputs=[Output("bleu", "number", min=0.0, max=100.0,
                    description="Sentence BLEU on sacrebleu's 0-100 scale, against every reference at once.")],
    params=_PARAMS,
)
def bleu(
    record: Record, *, tokenize: Tokenize = "13a", smooth_method: Smooth = "exp", smooth_value: float | None = None,
    lowercase: bool = False,
) -> float:
    """Sentence BLEU of the output against the reference (each element of a JSON-list reference is one more
    reference), equal to sacrebleu.sentence_bleu with the same settings."""
    output, references = texts(record)
    return sentence_bleu(output, references, tokenize=tokenize, smooth_method=smooth_method,
                         smooth_value=smooth_value, lowercase=lowercase)


def _corpus_stats(
    record: Record, *, tokenize: str = "13a", smooth_method: str = "exp", smooth_value: float | None = None,
    lowercase: bool = False,
) -> list[int]:
    output, references = texts(record)
    return segment_stats(output, references, tokenize, lowercase)


@evaluator(
    "builtin/corpus-bleu",
    version="1.0.0",
    pack="text",
    scope="dataset",
    requires=["output", "reference"],
    mapper=_corpus_stats,
    map_batch=_corpus_batch,
    stack=stack_counts,
    check=_check_for("builtin/corpus-bleu"),
    outputs=[Output("bleu", "number", min=0.0, max=100.0,
                    description="Corpus BLEU on sacrebleu's 0-100 scale: n-gram matches and lengths summed over "
                    "the records, then one BLEU.")],
    params=_PARAMS,
)
def corpus_bleu(
    stats: Any, *, tokenize: Tokenize = "13a", smooth_method: Smooth = "exp",
    smooth_value: float | None = None, lowercase: bool = False,
) -> float:
    """Corpus BLEU over the dataset, equal to sacrebleu.corpus_bleu with the same settings; its interval is the
    bootstrap over records of the same sums."""
    summed = summed_counts(stats)
    return compute_bleu(summed[2:6], summed[6:], summed[0], summed[1], smooth_method, smooth_value, False)


EVALUATORS = (bleu, corpus_bleu)
