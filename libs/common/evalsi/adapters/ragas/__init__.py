"""RAGAS metrics as Evals.si evaluators (``ragas/<metric>``), served as an evaluator plugin in RAGAS's own venv.

Importing this package never imports RAGAS: it names where the plugin lives (``PLUGIN_DIR``, the directory
holding ``evalsi-plugin.yaml``), the pinned upstream and the metrics the plugin serves. The evaluators themselves
(``evalsi.adapters.ragas.metrics``) import RAGAS and run only inside the plugin's venv. docs/adapters.md#ragas.
"""

from __future__ import annotations

from pathlib import Path

from evalsi.adapters.ragas.samples import METRICS, UPSTREAM

PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"

__all__ = ["METRICS", "PLUGIN_DIR", "UPSTREAM"]
