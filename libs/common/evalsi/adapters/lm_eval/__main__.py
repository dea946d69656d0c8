"""``python -m evalsi.adapters.lm_eval ARGS``: lm-eval's own command line (``lm_eval ARGS``) with ``--model evalsi``
registered. lm-eval finds models only in its registry; this registers ours, then hands over to its CLI."""

from __future__ import annotations

from lm_eval.__main__ import cli_evaluate

import evalsi.adapters.lm_eval.model  # noqa: F401  # registers --model evalsi

if __name__ == "__main__":
    cli_evaluate()
