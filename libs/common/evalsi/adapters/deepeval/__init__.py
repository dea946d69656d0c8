"""The DeepEval adapter, both directions: DeepEval's metrics as Evals.si evaluators (a plugin, served from DeepEval's
own virtualenv: ``PLUGIN_DIR``), and Evals.si evaluators as DeepEval metrics (``evalsi_metric``).
docs/adapters.md#deepeval.

Importing this package does not import DeepEval (the host that loads the plugin does not have it); ``evalsi_metric``
and ``EvalsiMetric`` import it when first used, where DeepEval is installed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalsi.adapters.deepeval.reverse import EvalsiMetric, evalsi_metric

# The release the contract tests run against; the plugin's manifest pins it (plugin/evalsi-plugin.yaml).
UPSTREAM = "deepeval==4.3.1"
# The plugin: a directory holding evalsi-plugin.yaml, to be placed (linked or copied) under a --plugins-dir.
PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"

# Set before DeepEval is first imported (this package's __init__ runs before any of its modules): DeepEval sends
# usage telemetry, reads .env files from the working directory and checks PyPI for updates unless told not to.
# Defaults only, so a user's explicit choice in their own process stands; a plugin process starts with none of them.
OFFLINE_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
}
for _key, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)

_REVERSE = ("EvalsiMetric", "evalsi_metric")


def __getattr__(name: str) -> Any:
    # The reverse metric subclasses DeepEval's BaseMetric: importing it needs DeepEval, so only on first use.
    if name in _REVERSE:
        from evalsi.adapters.deepeval import reverse

        return getattr(reverse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["OFFLINE_ENV", "PLUGIN_DIR", "UPSTREAM", "EvalsiMetric", "evalsi_metric"]
