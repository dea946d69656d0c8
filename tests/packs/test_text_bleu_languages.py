"""BLEU with sacrebleu's language tokenizers, zh and intl, equals sacrebleu's sentence_bleu and corpus_bleu on
mixed-script texts (Chinese, full-width forms, CJK and general punctuation, symbols, emoji, numbers with
separators); zh's character ranges equal sacrebleu's own test on every code point; the batch form equals the
function; intl without the regex package is refused at bind, naming the install."""

from __future__ import annotations

import builtins
import logging
import random
import sys
from typing import Any

import pytest
import sacrebleu
from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh
from text_cases import pairs

import evalsi
from evalsi.errors import BadInputError
from evalsi.packs.text import _language_tokenizers
from evalsi.packs.text.bleu import bleu, bleu_batch, corpus_bleu, sentence_bleu
from evalsi.records import make_record

logging.getLogger("sacrebleu").setLevel(logging.ERROR)

_PIECES = [
    "我们", "今天", "去", "北京", "看", "长城", "。", "，", "！", "？", "「", "」", "《", "》", "（", "）", "：", "、",
    "ＡＢＣ", "１２３", "ｆｕｌｌ", "\u3000", "东京", "日本語", "한국어", "カタカナ", "ｶﾀｶﾅ", "—", "–", "…", "‰", "€",
    "→", "⇒", "∑", "≈", "☀", "✓", "❤", "㈱", "㎏", "﹐", "︰", "⺀", "⼀", "⿰", "ㄅ", "ㆠ", "㇀", "😀", "🫨", "©", "°",
    "½", "²", "٣", "۴", "¿", "¡", "«", "»", "„", "‚", "'", '"', "3.14", "1,000", "7-8", "2026", "e-mail", "U.S.",
    "the", "cat", "sat", "mat", "Paris", "Ünïcödé", ".", ",", "!", "?", "-", "(", ")", "$", "%", "&amp;",
    "\U0002000b", "\U0002f800", "\u2000", "\u2001", "\u2a6d", "\u2a6e", "\u2f80", "\u2f81", "\u2fa1", "\u2fa2",
]


def _mixed(rng: random.Random, count: int) -> list[tuple[str, str]]:
    def text() -> str:
        joiner = rng.choice(["", " ", " ", "  "])
        return joiner.join(rng.choice(_PIECES) for _ in range(rng.randint(0, 30)))

    out = []
    for _ in range(count):
        reference = text()
        hypothesis = reference if rng.random() < 0.2 else text()
        if rng.random() < 0.3 and reference:  # a near miss: a piece dropped
            cut = rng.randrange(len(reference))
            hypothesis = reference[:cut] + reference[cut + 1:]
        out.append((hypothesis, reference))
    return out


CASES = _mixed(random.Random(11), 500) + pairs(100, seed=12)


def test_zh_characters_are_sacrebleus_on_every_code_point() -> None:
    """sacrebleu's ranges as written, two-character bounds included (U+2001..U+2A6D and U+2F81..U+2FA1): the
    first four planes, where every bound lies, and every 97th code point beyond."""
    pattern = _language_tokenizers._ZH_CHARACTER
    is_chinese = TokenizerZh._is_chinese_char.__wrapped__
    codes = [*range(0x40000), *range(0x40000, sys.maxunicode + 1, 97)]
    different = [code for code in codes if bool(pattern.fullmatch(chr(code))) != is_chinese(chr(code))]
    assert different == []
    assert pattern.fullmatch("\u2014") and not pattern.fullmatch("\u2000") and pattern.fullmatch("\u2a6d")


@pytest.mark.parametrize("tokenize", ["zh", "intl"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_sentence_bleu_equals_sacrebleu(tokenize: str, lowercase: bool) -> None:
    for hypothesis, reference in CASES:
        ours = sentence_bleu(hypothesis, [reference], tokenize=tokenize, lowercase=lowercase)
        theirs = sacrebleu.sentence_bleu(hypothesis, [reference], tokenize=tokenize, lowercase=lowercase).score
        assert ours == theirs, (hypothesis, reference)
    assert sum(0 < sentence_bleu(h, [r], tokenize=tokenize) < 100 for h, r in CASES) > 100


@pytest.mark.parametrize("tokenize", ["zh", "intl"])
def test_corpus_bleu_equals_sacrebleu(tokenize: str) -> None:
    kept = [(h, r) for h, r in CASES if h]
    mapped = [corpus_bleu.mapper(make_record(output=h, reference=r), tokenize=tokenize) for h, r in kept if r]
    theirs = sacrebleu.corpus_bleu([h for h, r in kept if r], [[r for _, r in kept if r]], tokenize=tokenize)
    assert corpus_bleu(mapped, tokenize=tokenize) == theirs.score
    assert 0 < theirs.score < 100


@pytest.mark.parametrize("tokenize", ["zh", "intl"])
def test_the_batch_form_equals_the_function(tokenize: str) -> None:
    """A column is tokenized a text at a time (zh strips each text, intl reads its ends): the same figures."""
    columns: dict[str, list[str]] = {"output": [h for h, _ in CASES], "reference": [r for _, r in CASES]}
    decided = bleu_batch(columns, tokenize=tokenize)
    checked = 0
    for (hypothesis, reference), entry in zip(CASES, decided, strict=True):
        if entry is not None:
            assert entry == bleu.fn(make_record(output=hypothesis, reference=reference), tokenize=tokenize)
            checked += 1
    assert checked > 500


def test_chinese_bleu_through_evaluate() -> None:
    """What a user translating into Chinese runs: 13a sees each unspaced sentence as one word, zh its characters."""
    rows = [{"id": "1", "output": "我们今天去北京。", "reference": "我们今天去北京看长城。"}]
    zh = evalsi.evaluate(rows, ["bleu"], params={"bleu": {"tokenize": "zh"}}).metric("bleu").mean
    assert zh == pytest.approx(sacrebleu.sentence_bleu(rows[0]["output"], [rows[0]["reference"]],
                                                       tokenize="zh").score)
    assert zh > 40 and sentence_bleu(rows[0]["output"], [rows[0]["reference"]]) < 20


def test_intl_without_the_regex_package_is_refused_at_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def without_regex(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "regex":
            raise ImportError("No module named 'regex'")
        return real_import(name, *args, **kwargs)

    _language_tokenizers._intl_rules.cache_clear()
    monkeypatch.setattr(builtins, "__import__", without_regex)
    try:
        with pytest.raises(BadInputError, match=r"builtin/bleu: tokenize 'intl' needs the regex package.*"
                                                r"evalsi\[text\]"):
            evalsi.evaluate([{"output": "a", "reference": "a"}], ["bleu"], params={"bleu": {"tokenize": "intl"}})
    finally:
        monkeypatch.undo()
        _language_tokenizers._intl_rules.cache_clear()


def test_an_unknown_tokenizer_names_the_accepted_ones() -> None:
    with pytest.raises(BadInputError, match=r"tokenize.*13a.*zh.*intl"):
        evalsi.evaluate([{"output": "a", "reference": "a"}], ["bleu"], params={"bleu": {"tokenize": "ja-mecab"}})
