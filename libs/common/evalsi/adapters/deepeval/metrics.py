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
from typing import Any

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.metrics import BaseMetric  # type: ignore[import-not-found]
from deepeval.test_case import LLMTestCase, SingleTurnParams  # type: ignore[import-not-found]

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.cases import case_fields
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.errors import BadInputError
from evalsi.evaluators import EvalContext, Evaluator, Output, Pack, evaluator
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

VERSION = UPSTREAM.split("==")[1]
MAX_CRITERIA = 4000  # characters of a G-Eval criteria param: it is sent to the judge with every record


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


def _outputs(about: str) -> list[Output]:
    return [
        Output("score", "number", min=0.0, max=1.0, description=f"DeepEval's score: {about}"),
        Output("passed", description="DeepEval's success: the score at or above the threshold"),
    ]


def _check_threshold(*, threshold: float, **_: Any) -> None:
    if not 0.0 <= threshold <= 1.0:
        raise BadInputError(f"param threshold: {threshold} is outside [0, 1] (DeepEval's scores are in [0, 1])")


async def measure(metric: BaseMetric, model: JudgeLLM, record: Record) -> list[Score]:
    """``metric`` over ``record``'s test case: DeepEval's score and success, explained by its reason."""
    await metric.a_measure(LLMTestCase(**case_fields(record)), _show_indicator=False)
    if metric.score is None:
        raise ValueError(f"DeepEval's {type(metric).__name__} gave no score: {metric.error or 'no error given'}")
    reason = metric.reason or ""
    score = Score(name="score", number=float(metric.score), explanation=reason)
    live = [c for c in model.completions if not c.cached]  # cache hits spent no tokens
    score.cost.input_tokens = sum(c.input_tokens for c in live)
    score.cost.output_tokens = sum(c.output_tokens for c in live)
    score.cost.total_tokens = score.cost.input_tokens + score.cost.output_tokens
    return [score, Score(name="passed", passed=bool(metric.success), explanation=reason)]


def _template(slug: str) -> str:
    return f"deepeval:{slug}@{VERSION}"


def metric_evaluator(spec: MetricSpec) -> Evaluator:
    """The evaluator ``deepeval/<slug>`` measuring each record with DeepEval's metric class ``spec.cls``."""
    make: Callable[..., BaseMetric] = getattr(deepeval_metrics, spec.cls)

    @evaluator(f"deepeval/{spec.slug}", version=VERSION, requires=(*spec.requires, "judge"),
               outputs=_outputs(spec.about), check=_check_threshold,
               description=f"DeepEval's {spec.cls} ({UPSTREAM}), its model calls answered by the run's judge.",
               params={"threshold": "DeepEval's threshold for passed (0-1)",
                       "include_reason": "ask the judge for DeepEval's reason (one call more per record)",
                       "strict_mode": "DeepEval's strict mode: the score is 0 or 1, the threshold 1"})
    async def measured(record: Record, ctx: EvalContext, *, threshold: float = 0.5, include_reason: bool = True,
                       strict_mode: bool = False) -> list[Score]:
        model = JudgeLLM(ctx.require_judge(), _template(spec.slug))
        metric = make(threshold=threshold, model=model, include_reason=include_reason, strict_mode=strict_mode,
                      async_mode=True, verbose_mode=False)
        return await measure(metric, model, record)

    return measured


def _check_g_eval(*, threshold: float, criteria: str, **_: Any) -> None:
    _check_threshold(threshold=threshold)
    if not criteria.strip() or len(criteria) > MAX_CRITERIA:
        raise BadInputError(f"param criteria: give what G-Eval grades, 1 to {MAX_CRITERIA} characters "
                            f"(got {len(criteria.strip())})")


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
           outputs=_outputs("G-Eval's normalized grade against the criteria"), check=_check_g_eval,
           description=f"DeepEval's GEval ({UPSTREAM}): the judge writes evaluation steps for the criteria, then "
                       "grades the record by them.",
           params={"criteria": "what to grade, in words (G-Eval derives its evaluation steps from it)",
                   "name": "the metric's name in DeepEval's prompts",
                   "threshold": "DeepEval's threshold for passed (0-1)",
                   "strict_mode": "DeepEval's strict mode: the score is 0 or 1, the threshold 1"})
async def g_eval(record: Record, ctx: EvalContext, *, criteria: str, name: str = "G-Eval", threshold: float = 0.5,
                 strict_mode: bool = False) -> list[Score]:
    # The template key holds the criteria: steps derived for one criteria are never reused for another.
    model = JudgeLLM(ctx.require_judge(), f"{_template('g-eval')}:{name}:{criteria}")
    metric = deepeval_metrics.GEval(name=name, criteria=criteria, evaluation_params=g_eval_params(record),
                                    threshold=threshold, model=model, strict_mode=strict_mode, async_mode=True,
                                    verbose_mode=False)
    return await measure(metric, model, record)


EVALUATORS = (*(metric_evaluator(spec) for spec in METRICS), g_eval)

pack = Pack(name="deepeval", evaluators=EVALUATORS, tier="wrapped", upstream=UPSTREAM,
            description=f"DeepEval's metrics ({UPSTREAM}) graded by the run's judge.")
