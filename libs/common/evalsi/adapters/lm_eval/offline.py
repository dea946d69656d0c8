"""lm-eval's dependencies that phone home, told not to (set before they are imported; the user's own setting wins).

``huggingface_hub`` (under ``datasets`` and ``evaluate``) sends usage telemetry unless told not to; the samples a
run evaluates and the model it calls are nobody else's business. Hub *downloads* are left alone: a task naming a
Hub dataset needs one (a task over local files, ``dataset_path: json``, makes no connection: the contract tests
run behind a proxy that counts connections, and it counts none).
"""

from __future__ import annotations

import os

OPT_OUTS = {
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
}


def quiet_upstream() -> None:
    for name, value in OPT_OUTS.items():
        os.environ.setdefault(name, value)
