"""The agent pack: evaluators over a record's trajectory (tool calls, steps, usage) and over sessions. Opt-in.

``goal-judge`` asks an LLM judge; the others are deterministic.
"""

from evalsi.evaluators import Pack
from evalsi.packs.agent import efficiency, judged, outcome, policy, sandbox_events, tools

PACK = Pack(
    name="agent",
    evaluators=(
        *outcome.EVALUATORS, *judged.EVALUATORS, *tools.EVALUATORS, *policy.EVALUATORS, *efficiency.EVALUATORS,
        *sandbox_events.EVALUATORS,
    ),
    description="Trajectory evaluators: task success, goal completion over a session (from markers, or judged by "
    "an LLM), tool-call accuracy, trajectory match, tool errors, loop detection, policy violations, sandbox policy "
    "events, step efficiency and budget adherence.",
    default_on=False,
)

__all__ = ["PACK"]
