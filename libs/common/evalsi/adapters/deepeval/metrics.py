"""DeepEval's metrics as Evals.si evaluators (``deepeval/<metric>``), the entrypoint of the adapter's plugin.

Each record becomes an ``LLMTestCase`` (``cases.case_fields``) measured by a fresh DeepEval metric whose
model is the run's judge (``judge_model.JudgeLLM``). The result is two scores: ``score``, DeepEval's number, and
``passed``, DeepEval's own success (the score at or above the threshold: since DeepEval 4 every metric scores 1 as
the best, bias, toxicity and hallucination included), both explained by DeepEval's reason and costed with the
judge's tokens.
Runs in DeepEval's virtualenv (plugin/evalsi-plugin.yaml); the host that loads the plugin never imports DeepEval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.metrics import BaseMetric  # type: ignore[import-not-found]
from deepeval.test_case import LLMTestCase, SingleTurnParams  # type: ignore[import-not-found]

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.agentic import AGENTIC
from evalsi.adapters.deepeval.cases import case_fields
from evalsi.adapters.deepeval.conversational import CONVERSATIONAL
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.adapters.deepeval.mcp_use import mcp_use
from evalsi.adapters.deepeval.multiturn import MULTITURN
from evalsi.adapters.deepeval.scoring import (
    COMMON_PARAMS,
    VERSION,
    check_criteria,
    check_threshold,
    measure,
    outputs,
    template,
)
from evalsi.adapters.deepeval.traced import TRACED_EVALUATORS
from evalsi.evaluators import EvalContext, Evaluator, Pack, evaluator
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score


@dataclass(frozen=True)
class MetricSpec:
    """One DeepEval metric: its class, the record fields it reads, what its score measures."""

    slug: str
    cls: str
    requires: tuple[str, ...]
    about: str


METRICS = (
    MetricSpec("answer-relevancy", "AnswerRelevancyMetric", ("input", "output"),
               about="statements of the output relevant to the input / statements"),
    MetricSpec("faithfulness", "FaithfulnessMetric", ("input", "output", "context"),
               about="claims of the output that the retrieved context does not contradict / claims"),
    MetricSpec("contextual-precision", "ContextualPrecisionMetric", ("input", "output", "reference", "context"),
               about="weighted precision of the chunks useful for the expected output, by rank"),
    MetricSpec("contextual-recall", "ContextualRecallMetric", ("input", "output", "reference", "context"),
               about="statements of the expected output attributable to the retrieved context / statements"),
    MetricSpec("contextual-relevancy", "ContextualRelevancyMetric", ("input", "output", "context"),
               about="statements of the retrieved context relevant to the input / statements"),
    MetricSpec("hallucination", "HallucinationMetric", ("input", "output", "context"),
               about="context items the output agrees with / items (DeepEval 4: 1 is no hallucination)"),
    MetricSpec("bias", "BiasMetric", ("input", "output"),
               about="opinions in the output that are not biased / opinions (DeepEval 4: 1 is unbiased)"),
    MetricSpec("toxicity", "ToxicityMetric", ("input", "output"),
               about="opinions in the output that are not toxic / opinions (DeepEval 4: 1 is not toxic)"),
)


def metric_evaluator(spec: MetricSpec) -> Evaluator:
    """The evaluator ``deepeval/<slug>`` measuring each record with DeepEval's metric class ``spec.cls``."""
    make: Callable[..., BaseMetric] = getattr(deepeval_metrics, spec.cls)

    @evaluator(f"deepeval/{spec.slug}", version=VERSION, requires=(*spec.requires, "judge"),
               outputs=outputs(spec.about), check=check_threshold,
               description=f"DeepEval's {spec.cls} ({UPSTREAM}), its model calls answered by the run's judge.",
               params=COMMON_PARAMS)
    async def measured(record: Record, ctx: EvalContext, *, threshold: float = 0.5, include_reason: bool = True,
                       strict_mode: bool = False) -> list[Score]:
        model = JudgeLLM(ctx.require_judge(), template(spec.slug))
        metric = make(threshold=threshold, model=model, include_reason=include_reason, strict_mode=strict_mode,
                      async_mode=True, verbose_mode=False)
        return await measure(metric, model, LLMTestCase(**case_fields(record)))

    return measured


def g_eval_params(record: Record) -> list[SingleTurnParams]:
    """What G-Eval shows the judge: the input and the output, and the expected output and retrieved context when
    the record has them."""
    fields = case_fields(record)
    shown = [SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT]
    if "expected_output" in fields:
        shown.append(SingleTurnParams.EXPECTED_OUTPUT)
    if "retrieval_context" in fields:
        shown.append(SingleTurnParams.RETRIEVAL_CONTEXT)
    return shown


@evaluator("deepeval/g-eval", version=VERSION, requires=("input", "output", "judge"),
           outputs=outputs("G-Eval's normalized grade against the criteria"), check=check_criteria,
           description=f"DeepEval's GEval ({UPSTREAM}): the judge writes evaluation steps for the criteria, then "
                       "grades the record by them.",
           params={"criteria": "what to grade, in words (G-Eval derives its evaluation steps from it)",
                   "name": "the metric's name in DeepEval's prompts",
                   "threshold": "DeepEval's threshold for passed (0-1)",
                   "strict_mode": "DeepEval's strict mode: the score is 0 or 1, the threshold 1"})
async def g_eval(record: Record, ctx: EvalContext, *, criteria: str, name: str = "G-Eval", threshold: float = 0.5,
                 strict_mode: bool = False) -> list[Score]:
    # The template key holds the criteria: steps derived for one criteria are never reused for another.
    model = JudgeLLM(ctx.require_judge(), f"{template('g-eval')}:{name}:{criteria}")
    metric = deepeval_metrics.GEval(name=name, criteria=criteria, evaluation_params=g_eval_params(record),
                                    threshold=threshold, model=model, strict_mode=strict_mode, async_mode=True,
                                    verbose_mode=False)
    return await measure(metric, model, LLMTestCase(**case_fields(record)))


EVALUATORS = (*(metric_evaluator(spec) for spec in METRICS), g_eval, *AGENTIC, *TRACED_EVALUATORS, mcp_use,
              *CONVERSATIONAL, *MULTITURN)

pack = Pack(name="deepeval", evaluators=EVALUATORS, tier="wrapped", upstream=UPSTREAM,
            description=f"DeepEval's metrics ({UPSTREAM}) graded by the run's judge.")
