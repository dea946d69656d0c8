"""Sentence pairs for the text pack's equality tests against its reference libraries: seeded random sentences
over a vocabulary with shared words, inflections (for stems), punctuation, numbers, hyphens, HTML entities,
newlines and non-Latin scripts, plus the edge cases (empty, whitespace only, punctuation only, one word, long)."""

from __future__ import annotations

import random

_WORDS = [
    "the", "a", "an", "cat", "cats", "dog", "dogs", "sat", "sitting", "sits", "on", "mat", "mats", "quick", "quickly",
    "brown", "fox", "jumps", "jumped", "jumping", "over", "lazy", "running", "runs", "ran", "house", "houses",
    "generous", "generously", "city", "cities", "Paris", "Berlin", "The", "THE", "Fox", "Quick", "relational",
    "relate", "connection", "connected", "hopeful", "hopefulness", "eat", "ate", "eaten", "3.14", "1,000", "42",
    "7-8", "2026", "e-mail", "well-known", "café", "naïve", "Straße", "Ünïcödé", "東京", "日本語", "Привет", "мир",
    "ελληνικά", "İstanbul", "ǅ", "ﬁne"
]
_PUNCT = (".", ",", "!", "?", ";", ":", "'", '"', "(", ")", "-", "--", "...", "&amp;", "&quot;", "&lt;", "/", "$", "%")
EDGE_CASES: tuple[tuple[str, str], ...] = (
    ("", "the cat sat on the mat"),
    ("the cat sat on the mat", ""),
    ("", ""),
    ("   ", "the cat"),
    ("!!! ... ???", "!!! ..."),
    ("cat", "cat"),
    ("cat", "dog"),
    ("the the the the the the the", "the cat is on the mat"),
    ("The cat sat on the mat.", "the cat sat on the mat ."),
    ("3.14, 1,000 and 7-8 items.", "3.14 , 1,000 and 7 - 8 items ."),
    ("It's a well-known e-mail &amp; &quot;fact&quot;", "It is a well known email & \"fact\""),
    ("line one\nline two-\nthree <skipped>", "line one line twothree"),
    ("a .  ,  . b ,, c   .", "a. , .b,,c ."),
    (" . ", ". .  ,"),
    ("1 .5 , 2. 3 -4 5-  6", "1.5, 2 .3 - 4 5 -6"),
    ("東京 日本語", "東京 は 日本語"),
    ("Привет, мир!", "привет мир"),
    ("naïve café Straße", "naive cafe strasse"),
    ("running runs ran relational connections", "run running runner relate connected"),
)


def sentence(rng: random.Random, low: int = 1, high: int = 25) -> str:
    words = []
    for _ in range(rng.randint(low, high)):
        roll = rng.random()
        words.append(rng.choice(_PUNCT) if roll < 0.12 else rng.choice(_WORDS))
        if roll > 0.93:
            words[-1] += rng.choice(_PUNCT)
    separator = rng.choice([" ", " ", " ", "  ", "\n"])
    return separator.join(words)


def pairs(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` (hypothesis, reference) pairs, about a third of them paraphrases of each other, then the edge
    cases; one in twenty is long (up to 200 words)."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        high = 200 if index % 20 == 0 else 25
        reference = sentence(rng, 1, high)
        if rng.random() < 0.35:
            words = reference.split()
            rng.shuffle(words[: len(words) // 3])
            hypothesis = " ".join(w for w in words if rng.random() > 0.2)
        else:
            hypothesis = sentence(rng, 0, high)
        out.append((hypothesis, reference))
    return out + list(EDGE_CASES)


def reference_sets(count: int, seed: int = 1) -> list[tuple[str, list[str]]]:
    """``count`` hypotheses with one to four references each (multi-reference rules: merged counts, the closest
    length, the best reference)."""
    rng = random.Random(seed)
    out = []
    for hypothesis, reference in pairs(count, seed):
        references = [reference] + [sentence(rng) for _ in range(rng.randint(0, 3))]
        out.append((hypothesis, references))
    return out
