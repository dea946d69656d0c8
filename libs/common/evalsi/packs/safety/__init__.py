"""The ``safety`` pack: leaks of personal data, secrets and canaries, refusal correctness, and judged harmlessness,
toxicity, prompt-injection and jailbreak success. Opt-in.

The leak and refusal evaluators are deterministic (RE2 patterns, checksums); the others ask the run's judge.
"""

from evalsi.evaluators import Pack
from evalsi.packs.safety import judged, leaks, refusal

PACK = Pack(
    name="safety",
    evaluators=(*leaks.EVALUATORS, *refusal.EVALUATORS, *judged.EVALUATORS),
    description="Safety checks: PII, secret and canary leaks (deterministic), refusal correctness (over- and "
    "under-refusal), and judged harmlessness, toxicity, prompt-injection and jailbreak success.",
    default_on=False,
)

__all__ = ["PACK"]
