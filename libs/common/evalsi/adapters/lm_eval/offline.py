"""lm-eval's dependencies that phone home, told not to (set before they are imported; the user's own setting wins).

``datasets`` counts every load of a packaged builder (``json``, ``csv``, ...) with a request to Hugging Face's S3
bucket, and ``huggingface_hub`` sends usage telemetry, unless told not to: which data a run evaluates is nobody
else's business. Both read these variables once, on import: ``python -m evalsi.adapters.lm_eval`` sets them first;
from Python, import ``evalsi.adapters.lm_eval.model`` before lm-eval's ``loggers`` or ``tasks``.

Hub *downloads* are left alone: a task naming a Hub dataset needs one. A task over local files
(``dataset_path: json``) makes no connection: the contract tests run it under an audit hook that refuses and notes
every connection off the machine, and it notes none.
"""

from __future__ import annotations

import os

OPT_OUTS = {
    "HF_UPDATE_DOWNLOAD_COUNTS": "0",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
}


def quiet_upstream() -> None:
    for name, value in OPT_OUTS.items():
        os.environ.setdefault(name, value)
