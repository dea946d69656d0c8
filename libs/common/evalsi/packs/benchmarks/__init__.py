"""The benchmarks pack: the graders of imported benchmarks (``bfcl://``, ``tau2://`` datasets). Opt-in."""

from evalsi.evaluators import Pack
from evalsi.packs.benchmarks import bfcl

PACK = Pack(
    name="benchmarks",
    evaluators=(*bfcl.EVALUATORS,),
    description="Graders of imported benchmarks: BFCL's AST checker.",
    default_on=False,
)

__all__ = ["PACK"]
