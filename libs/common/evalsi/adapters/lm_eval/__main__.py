"""``python -m evalsi.adapters.lm_eval ARGS``: lm-eval's own command line (``lm_eval ARGS``) with ``--model evalsi``
registered. lm-eval finds models only in its registry; this registers ours, then hands over to its CLI."""

from __future__ import annotations

from evalsi.adapters.lm_eval.offline import quiet_upstream


def main() -> None:
    quiet_upstream()  # before lm-eval imports datasets and huggingface_hub, which read the opt-outs on import
    from lm_eval.__main__ import cli_evaluate  # lm-eval: installed in its own virtualenv, not evalsi's

    import evalsi.adapters.lm_eval.model  # noqa: F401  # registers --model evalsi

    cli_evaluate()


if __name__ == "__main__":
    main()
