"""builtin/meteor equals nltk.translate.meteor_score.meteor_score on the same word lists: without synonyms, nltk's
with a WordNet that has none; with synonyms, nltk's with the same WordNet reader (a small stand-in here: no
WordNet is downloaded, and asking for synonyms without a local corpus is refused at bind)."""

from __future__ import annotations

import random
from typing import Any

import nltk
import pytest
import sacrebleu
from nltk.translate.meteor_score import meteor_score
from text_cases import reference_sets

import evalsi
from evalsi.errors import BadInputError
from evalsi.packs.text import meteor as meteor_module
from evalsi.packs.text.meteor import meteor, single_meteor
from evalsi.records import make_record

DEFAULTS = {"alpha": 0.9, "beta": 3.0, "gamma": 0.5}


class _Lemma:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


class _Synset:
    def __init__(self, names: list[str]) -> None:
        self._lemmas = [_Lemma(n) for n in names]

    def lemmas(self) -> list[_Lemma]:
        return self._lemmas


class StandInWordNet:
    """nltk's WordNetCorpusReader as the synonym stage reads it (synsets -> lemmas -> name), over a fixed table."""

    def __init__(self, synonyms: dict[str, list[list[str]]]) -> None:
        self._synonyms = synonyms

    def synsets(self, lemma: str) -> list[_Synset]:
        return [_Synset(names) for names in self._synonyms.get(lemma, [])]


NO_SYNONYMS = StandInWordNet({})
SYNONYMS = StandInWordNet({
    "quick": [["quick", "fast", "speedy"]], "fast": [["fast", "quick"], ["firm", "fast"]],
    "dog": [["dog", "domestic_dog", "canis_familiaris"], ["hound", "dog"]], "big": [["big", "large"]],
    "larg": [["large", "big"]], "run": [["run", "sprint"]], "hous": [["house", "home"]], "home": [["home", "house"]],
})
_SYNONYM_WORDS = [
    "the", "a", "quick", "fast", "speedy", "dog", "hound", "big", "large", "run", "sprint", "house", "home", "houses",
    "homes", "runs", "ran"
]


def _split_13a(text: str) -> list[str]:
    return sacrebleu.BLEU(tokenize="13a").tokenizer(text.rstrip()).split()


@pytest.mark.parametrize("split", [str.split, _split_13a])
def test_meteor_equals_nltk_without_synonyms(split: Any) -> None:
    for hypothesis, references in reference_sets(250, seed=6):
        ours = max(single_meteor(split(r), split(hypothesis), wordnet=None, **DEFAULTS) for r in references)
        theirs = meteor_score([split(r) for r in references], split(hypothesis), wordnet=NO_SYNONYMS)
        assert ours == theirs, (hypothesis, references)


def test_meteor_equals_nltk_with_the_same_wordnet() -> None:
    rng = random.Random(8)
    matched = 0
    for _ in range(300):
        hypothesis = [rng.choice(_SYNONYM_WORDS) for _ in range(rng.randint(0, 12))]
        references = [[rng.choice(_SYNONYM_WORDS) for _ in range(rng.randint(1, 12))] for _ in range(rng.randint(1, 3))]
        ours = max(single_meteor(r, hypothesis, wordnet=SYNONYMS, **DEFAULTS) for r in references)
        assert ours == meteor_score(references, hypothesis, wordnet=SYNONYMS)
        matched += ours > max(single_meteor(r, hypothesis, wordnet=None, **DEFAULTS) for r in references)
    assert matched > 20  # the synonym stage did match words the exact and stem stages left


@pytest.mark.parametrize(("alpha", "beta", "gamma"), [(0.5, 1.0, 0.0), (0.85, 2.35, 0.45), (0.1, 5.0, 1.0)])
def test_meteor_params_equal_nltk(alpha: float, beta: float, gamma: float) -> None:
    for hypothesis, references in reference_sets(80, seed=12):
        ours = max(single_meteor(r.split(), hypothesis.split(), wordnet=None, alpha=alpha, beta=beta, gamma=gamma)
                   for r in references)
        theirs = meteor_score([r.split() for r in references], hypothesis.split(), wordnet=NO_SYNONYMS,
                              alpha=alpha, beta=beta, gamma=gamma)
        assert ours == theirs


def test_synonyms_without_a_local_wordnet_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    meteor_module.local_wordnet.cache_clear()
    try:
        with pytest.raises(BadInputError, match="never downloaded"):
            meteor.bind({"synonyms": True})
    finally:
        meteor_module.local_wordnet.cache_clear()
    assert not any(tmp_path.iterdir())  # nothing was fetched into nltk's data path
    meteor.bind({"synonyms": False})


def test_the_evaluator_uses_the_local_wordnet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meteor_module, "local_wordnet", lambda: SYNONYMS)
    record = make_record(output="a fast hound", reference="the quick dog")
    with_synonyms = meteor(record, tokenize="whitespace", synonyms=True, **DEFAULTS)
    assert with_synonyms == meteor_score([["the", "quick", "dog"]], ["a", "fast", "hound"], wordnet=SYNONYMS) > 0
    assert meteor(record, tokenize="whitespace", synonyms=False, **DEFAULTS) == 0.0


@pytest.mark.parametrize(("params", "message"), [({"alpha": 1.0}, "alpha"), ({"gamma": 2.0}, "gamma"),
                                                 ({"tokenize": "words"}, "tokenize")])
def test_bad_params_are_refused_naming_them(params: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match=f"param '{message}'"):
        meteor.bind(params)


def test_evaluate_embedded() -> None:
    cases = [(h, r) for h, r in reference_sets(40, seed=13) if h.strip() and all(x.strip() for x in r)]
    rows = [{"id": f"r{i}", "output": h, "reference": r if len(r) > 1 else r[0]} for i, (h, r) in enumerate(cases)]
    results = evalsi.evaluate(rows, [{"ref": "meteor", "params": {"tokenize": "13a"}}])
    expected = [meteor_score([_split_13a(x) for x in r], _split_13a(h), wordnet=NO_SYNONYMS) for h, r in cases]
    assert results.metric("meteor").mean == pytest.approx(sum(expected) / len(expected))
