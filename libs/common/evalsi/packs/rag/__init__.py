"""The ``rag`` pack: retrieval-augmented generation metrics. Opt-in.

Faithfulness (claim by claim), answer relevance, context precision and context recall ask the run's judge for
per-item verdicts and score them with RAGAS' formulas (DeepEval's for answer relevance); citation accuracy is
deterministic.
"""

from evalsi.evaluators import Pack
from evalsi.packs.rag import citations, judged

PACK = Pack(
    name="rag",
    evaluators=(*judged.EVALUATORS, *citations.EVALUATORS),
    description="RAG metrics: claim-based faithfulness, answer relevance, context precision and recall (judged, "
    "RAGAS formulas) and citation accuracy (deterministic).",
    default_on=False,
)

__all__ = ["PACK"]
