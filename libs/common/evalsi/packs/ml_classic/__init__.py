"""The ml-classic pack: classification, probability, regression and ranking metrics equal to scikit-learn's.
Opt-in.

Dataset metrics (accuracy, F1, ROC-AUC, ...) are dataset-scope evaluators whose mapped values are stacked once
into numpy columns, so the bootstrap's resamples re-reduce by weights; ``correct`` and ``ranking`` are per record.
"""

from evalsi.evaluators import Pack
from evalsi.packs.ml_classic import classification, probabilities, ranking, regression

PACK = Pack(
    name="ml-classic",
    evaluators=(*classification.EVALUATORS, *probabilities.EVALUATORS, *regression.EVALUATORS,
                *ranking.EVALUATORS),
    description="Classic ML metrics over tabular predictions (Content.row) or labels: correct, accuracy, "
    "precision/recall/F1 (micro, macro, weighted), confusion matrix, ROC-AUC, PR-AUC, log-loss, Brier, ECE, "
    "MAE/MSE/RMSE/R²/MAPE, NDCG@k/MRR/MAP/recall@k. Reference: scikit-learn.",
    default_on=False,
)

__all__ = ["PACK"]
