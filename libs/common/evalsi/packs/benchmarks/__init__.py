"""The benchmarks pack: the graders of imported benchmarks (``bfcl://``, ``tau2://`` datasets). Opt-in."""

from evalsi.evaluators import Pack
from evalsi.packs.benchmarks import bfcl, bfcl_agentic, bfcl_multi, tau2

PACK = Pack(
    name="benchmarks",
    evaluators=(*bfcl.EVALUATORS, *bfcl_multi.EVALUATORS, *bfcl_agentic.EVALUATORS, *tau2.EVALUATORS),
    description="Graders of imported benchmarks: BFCL's AST checker, multi-turn checker and agentic checker "
    "(memory); tau2-bench's DB, communicate, action and env assertion checks, and its NL assertions by the run's "
    "judge.",
    default_on=False,
)

__all__ = ["PACK"]
