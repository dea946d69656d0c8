"""The core pack: deterministic evaluators for matching, structure, length and usage. On by default."""

from evalsi.evaluators import Pack
from evalsi.packs.core import matching, structure, usage

PACK = Pack(
    name="core",
    evaluators=(*matching.EVALUATORS, *structure.EVALUATORS, *usage.EVALUATORS),
    description="Deterministic checks: exact, fuzzy, numeric, substring and regex matching; JSON validity and "
    "JSON Schema; output length; latency, tokens and cost.",
    default_on=True,
)

__all__ = ["PACK"]
