"""Run with the Presidio plugin venv's python, in an empty HOME: the plugin's entrypoint (which seals the process)
imported under the offline guard, then an email checked, which is when tldextract loads its suffix list.

Prints JSON: the score's verdict and the network attempts the guard saw (none: tldextract never tried).
"""

from __future__ import annotations

import json

from evalsi.testing import offline_guard

offline_guard.install()

from evalsi_presidio_plugin import pack  # noqa: E402

from evalsi.v1alpha1.record_pb2 import Record  # noqa: E402

[pii_leak] = pack.evaluators
record = Record()
record.output.text = "Write to jane.roe@example.co.uk today."
score = pii_leak.fn(record)
print(json.dumps({"passed": score.passed, "explanation": score.explanation, "blocked": offline_guard.blocked}))
