"""RAGAS 0.4.3's LLM-based metrics as ``ragas/<metric>`` evaluators: each record becomes a ``SingleTurnSample``
(``samples.sample_fields``) scored by RAGAS's own ``metric.single_turn_ascore`` with the run's judge as its LLM.
Imported only in the RAGAS plugin's venv (``plugin/``), where RAGAS is installed.

A malformed judge answer (RAGAS cannot parse it, nor its repair prompt's answer) raises, so it is the record's
evaluator error, never a score; a NaN from RAGAS (nothing to judge: no statements, no entities) is a skip with
the reason. Answer relevancy's embeddings come from WordLlama's model as its wheel ships it (``embeddings``):
there is no embedding model to call through the host, and none may be downloaded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ragas import SingleTurnSample  # type: ignore[import-not-found]
from ragas.metrics._answer_correctness import AnswerCorrectness  # type: ignore[import-not-found]
from ragas.metrics._answer_relevance import ResponseRelevancy  # type: ignore[import-not-found]
from ragas.metrics._context_entities_recall import ContextEntityRecall  # type: ignore[import-not-found]
from ragas.metrics._context_precision import LLMContextPrecisionWithReference  # type: ignore[import-not-found]
from ragas.metrics._context_recall import LLMContextRecall  # type: ignore[import-not-found]
from ragas.metrics._factual_correctness import FactualCorrectness  # type: ignore[import-not-found]
from ragas.metrics._faithfulness import Faithfulness  # type: ignore[import-not-found]
from ragas.metrics._noise_sensitivity import NoiseSensitivity  # type: ignore[import-not-found]

from evalsi.adapters.ragas.embeddings import WordLlamaEmbeddings
from evalsi.adapters.ragas.llm import JudgeLLM
from evalsi.adapters.ragas.samples import METRICS, UPSTREAM, sample_fields
from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import EvalContext, Evaluator, Output, Pack, evaluator
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

VERSION = "0.4.3"
PACK_NAME = "ragas/metrics"
_CHOICES = {
    "mode": ("f1", "precision", "recall"),
    "atomicity": ("low", "high"),
    "coverage": ("low", "high"),
    "noise_mode": ("relevant", "irrelevant"),
}


def _check(**params: Any) -> None:
    for name, value in params.items():
        accepted = _CHOICES[name]
        if value not in accepted:
            raise BadInputError(f"param {name}: {value!r} is not one of {', '.join(accepted)}")


async def score_with(metric: Any, record: Record, ctx: EvalContext) -> Score:
    """RAGAS's score of the record by ``metric``, its LLM the run's judge."""
    llm = JudgeLLM(ctx.require_judge())
    metric.llm = llm
    number = await metric.single_turn_ascore(SingleTurnSample(**sample_fields(record)))
    if number is None or math.isnan(number):
        raise SkipRecord(f"RAGAS {metric.name} gave no score (NaN): nothing in the record for it to judge")
    score = Score(number=float(number), explanation=f"RAGAS {metric.name} ({UPSTREAM})")
    score.metadata["judge_calls"].number_value = len(llm.completions)
    score.metadata["judge_calls_cached"].number_value = sum(c.cached for c in llm.completions)
    return score


def _adapted(name: str, description: str, check: Callable[..., None] | None = None,
             params: dict[str, str] | None = None, low: float = 0.0) -> Callable[[Callable[..., Any]], Evaluator]:
    return evaluator(f"ragas/{name}", version=VERSION, requires=(*METRICS[name], "judge"),
                     outputs=[Output("score", "number", min=low, max=1.0, description=description)],
                     params=params, check=check, pack=PACK_NAME)


@_adapted("faithfulness", "Claims of the response supported by the retrieved contexts / claims (RAGAS)")
async def faithfulness(record: Record, ctx: EvalContext) -> Score:
    """RAGAS faithfulness: the response's statements, each checked against the retrieved contexts."""
    return await score_with(Faithfulness(), record, ctx)


@_adapted("context-precision", "Average precision of the contexts useful for the reference, over ranks (RAGAS)")
async def context_precision(record: Record, ctx: EvalContext) -> Score:
    """RAGAS context precision with a reference: each retrieved context judged useful for the reference or not,
    averaged over ranks (RAGAS ``LLMContextPrecisionWithReference``)."""
    return await score_with(LLMContextPrecisionWithReference(), record, ctx)


@_adapted("context-recall", "Reference statements attributable to the retrieved contexts / statements (RAGAS)")
async def context_recall(record: Record, ctx: EvalContext) -> Score:
    """RAGAS context recall: the reference's statements, each attributed to the retrieved contexts or not
    (RAGAS ``LLMContextRecall``)."""
    return await score_with(LLMContextRecall(), record, ctx)


@_adapted("context-entity-recall", "Entities of the reference also found in the retrieved contexts (RAGAS)")
async def context_entity_recall(record: Record, ctx: EvalContext) -> Score:
    """RAGAS context entity recall: the entities the judge finds in the reference, and how many of them it also
    finds in the retrieved contexts."""
    return await score_with(ContextEntityRecall(), record, ctx)


@_adapted("factual-correctness", "Claim-level precision, recall or F1 of the response against the reference "
          "(RAGAS)", check=lambda mode, atomicity, coverage: _check(mode=mode, atomicity=atomicity,
                                                                     coverage=coverage),
          params={"mode": "f1 (default), precision or recall", "atomicity": "claim decomposition: low or high",
                  "coverage": "claim decomposition: low or high"})
async def factual_correctness(record: Record, ctx: EvalContext, *, mode: str = "f1", atomicity: str = "low",
                              coverage: str = "low") -> Score:
    """RAGAS factual correctness: response and reference decomposed into claims, each checked against the
    other."""
    return await score_with(FactualCorrectness(mode=mode, atomicity=atomicity, coverage=coverage), record, ctx)


@_adapted("answer-correctness", "F1 of the response's statements against the reference's (RAGAS, factuality only)")
async def answer_correctness(record: Record, ctx: EvalContext) -> Score:
    """RAGAS answer correctness, its factuality part alone (weights 1 and 0): RAGAS's default adds 25% semantic
    similarity from embeddings, which the plugin does not have offline."""
    return await score_with(AnswerCorrectness(weights=[1.0, 0.0]), record, ctx)


@_adapted("answer-relevancy", "Mean cosine of the input and questions the judge derives from the response, "
          "0 when the response is noncommittal (RAGAS; WordLlama embeddings)", low=-1.0)
async def answer_relevancy(record: Record, ctx: EvalContext) -> Score:
    """RAGAS answer relevancy: the judge writes the question the response answers (three times, RAGAS's
    strictness) and says whether the response is noncommittal; the score is the mean cosine of those questions
    with the input, embedded by WordLlama's shipped model (RAGAS's default would call an embedding API)."""
    return await score_with(ResponseRelevancy(embeddings=WordLlamaEmbeddings()), record, ctx)


@_adapted("noise-sensitivity", "Incorrect claims of the response that relevant (or irrelevant) contexts support "
          "(RAGAS; lower is better)", check=lambda noise_mode: _check(noise_mode=noise_mode),
          params={"noise_mode": "relevant (default) or irrelevant: which retrieved contexts are blamed"})
async def noise_sensitivity(record: Record, ctx: EvalContext, *, noise_mode: str = "relevant") -> Score:
    """RAGAS noise sensitivity: how often the response makes incorrect claims supported by retrieved contexts."""
    return await score_with(NoiseSensitivity(mode=noise_mode), record, ctx)


EVALUATORS = (faithfulness, context_precision, context_recall, context_entity_recall, factual_correctness,
              answer_correctness, answer_relevancy, noise_sensitivity)
PACK = Pack(name=PACK_NAME, evaluators=EVALUATORS, tier="wrapped", upstream=UPSTREAM,
            description="RAGAS's LLM-based metrics, scored by RAGAS with the run's judge as its LLM.")
