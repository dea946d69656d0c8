"""The built-in rubrics of ``llm-judge``: what "good" means, with anchors for each point of the 1-5 scale.

A rubric also says which record fields it looks at (``uses``): the others are left out of the prompt
(shown as "not used by this rubric"), so they neither distract the judge nor change its cache key.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalsi.errors import BadInputError


@dataclass(frozen=True)
class Rubric:
    name: str
    text: str
    uses: frozenset[str]  # record fields shown to the judge: input, reference, context (output always)
    needs_context: bool = False
    description: str = ""


CORRECTNESS = Rubric(
    name="correctness",
    description="Is the output factually and logically correct? Uses the reference answer when the record has one.",
    uses=frozenset({"input", "reference", "context"}),
    text="""\
Correctness: is the output a correct answer to the input?
If a reference answer is given, treat it as the ground truth: the output must agree with it on every point \
that matters. Different wording, format or extra correct detail are fine; missing or contradicting a key \
point is not. If no reference is given, judge by well-established knowledge and the input itself.

5 - Fully correct: answers what was asked, with no errors.
4 - Correct on the main point, with a minor inaccuracy or omission that does not change the answer.
3 - Partly correct: the main point is right but there is a significant error or omission, or the output \
hedges between a right and a wrong answer.
2 - Mostly incorrect: the main point is wrong, though some details are right.
1 - Incorrect, contradicts the reference, or does not answer.""",
)

HELPFULNESS = Rubric(
    name="helpfulness",
    description="Does the output help the user do what the input asks: on target, complete, actionable, clear?",
    uses=frozenset({"input"}),
    text="""\
Helpfulness: does the output help the person who wrote the input get what they need?
Consider whether it addresses the actual request, is complete enough to act on, is clear and well organized, \
and avoids needless padding. A justified refusal of a harmful request is helpful; an unjustified refusal, \
evasion or a generic non-answer is not.

5 - Fully meets the need: on target, complete, clear and directly usable.
4 - Meets the need with small gaps or some unnecessary content.
3 - Partly helpful: addresses the request but leaves important parts unanswered or unclear.
2 - Barely helpful: touches the request but would leave the person mostly unserved.
1 - Not helpful: off target, a non-answer, or an unjustified refusal.""",
)

RELEVANCE = Rubric(
    name="relevance",
    description="Does the output address the input that was asked, without drifting or padding? Not correctness.",
    uses=frozenset({"input"}),
    text="""\
Relevance: does the output address the input that was actually asked?
Judge only whether it stays on topic and answers this question rather than a different one; do not judge \
whether it is correct. Irrelevant tangents and filler lower the score.

5 - Entirely relevant: every part addresses the input.
4 - Relevant, with a little off-topic material.
3 - Partly relevant: addresses the input but much of it is beside the point.
2 - Mostly irrelevant: only loosely connected to the input.
1 - Irrelevant: does not address the input at all.""",
)

FAITHFULNESS = Rubric(
    name="faithfulness",
    description="Is every claim in the output supported by the record's context (retrieved documents)?",
    uses=frozenset({"input", "context"}),
    needs_context=True,
    text="""\
Faithfulness: is every claim in the output supported by the context?
Use only the context as evidence. A claim that is not stated in or directly implied by the context counts \
against the output even if it is true in the world. Saying that the context does not contain the answer, \
when it does not, is faithful.

5 - Every claim is supported by the context.
4 - Nearly all claims are supported; one minor detail goes beyond the context.
3 - The main claims are supported, but some notable claims are not.
2 - Many claims are unsupported, or one main claim is.
1 - The output is mostly unsupported by, or contradicts, the context.""",
)

RUBRICS: dict[str, Rubric] = {r.name: r for r in (CORRECTNESS, HELPFULNESS, RELEVANCE, FAITHFULNESS)}
CUSTOM_USES = frozenset({"input", "reference", "context"})


def get_rubric(name: str) -> Rubric:
    try:
        return RUBRICS[name]
    except KeyError:
        raise BadInputError(
            f"unknown rubric {name!r}; built-in rubrics: {', '.join(RUBRICS)} (or give rubric_text)"
        ) from None
