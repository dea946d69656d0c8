"""The code pack: Python syntax, unit tests and input/output cases, the executing ones in a sandbox. Opt-in.

``python-syntax`` parses only; ``unit-tests`` and ``code-exec-tests`` run the candidate program in a sandbox on the
``sandbox`` pool (embedded: the in-process ladder; on a server: evalsi-sandboxd), failing closed with
SANDBOX_UNAVAILABLE below the run's ``spec.sandbox.minIsolation``.
"""

from evalsi.evaluators import Pack
from evalsi.packs.code import evaluators

PACK = Pack(
    name="code",
    evaluators=evaluators.EVALUATORS,
    description="Code evaluators: Python syntax, unit tests and input/output cases run in a sandbox (pass rate, "
    "per-test results, the isolation enforced), pass@k over trials.",
    default_on=False,
)

__all__ = ["PACK"]
