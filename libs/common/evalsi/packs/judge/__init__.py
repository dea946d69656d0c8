"""The ``judge`` pack: model-graded evaluators (an LLM judge scores each record).

- ``builtin/llm-judge``: the output graded 1-5 against a rubric (correctness, helpfulness, relevance,
  faithfulness, or your own text), normalized to [0, 1].
- ``builtin/reference-correctness``: pass/fail, is the output correct given the reference?
- ``builtin/pairwise-preference``: candidate vs baseline (comparative), asked in both orders.
- ``builtin/prompt-judge``: your own prompt template file and scale.

Off by default: each needs a judge (``--judge-model`` / ``judge=...``); see docs/judges.md.
"""

from evalsi.evaluators import Pack

from .answers import Answer, parse_answer
from .evaluators import EVALUATORS, llm_judge, pairwise_preference, prompt_judge, reference_correctness
from .rubrics import RUBRICS, Rubric
from .templates import (
    Template,
    get_template,
    load_template_file,
    register_template,
    select_template,
    template_refs,
    unregister_template,
)

PACK = Pack(
    name="judge",
    evaluators=EVALUATORS,
    description="Model-graded evaluators: rubric scoring, reference-guided correctness, pairwise preference "
    "and custom prompt judges (need a judge model: --judge-model or judge=...).",
    default_on=False,
)

__all__ = [
    "EVALUATORS",
    "PACK",
    "RUBRICS",
    "Answer",
    "Rubric",
    "Template",
    "get_template",
    "llm_judge",
    "load_template_file",
    "pairwise_preference",
    "parse_answer",
    "prompt_judge",
    "reference_correctness",
    "register_template",
    "select_template",
    "template_refs",
    "unregister_template",
]
