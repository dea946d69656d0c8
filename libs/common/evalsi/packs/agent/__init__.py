"""The agent pack: evaluators over a record's trajectory (tool calls, steps, usage) and over sessions. Opt-in."""

from evalsi.evaluators import Pack
from evalsi.packs.agent import efficiency, outcome, tools

PACK = Pack(
    name="agent",
    evaluators=(*outcome.EVALUATORS, *tools.EVALUATORS, *efficiency.EVALUATORS),
    description="Trajectory evaluators: task success, goal completion over a session, tool-call accuracy, "
    "trajectory match, tool errors, loop detection, step efficiency and budget adherence.",
    default_on=False,
)

__all__ = ["PACK"]
