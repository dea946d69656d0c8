"""The evaluator packs that ship with Evals.si, each registered through the ``evalsi.packs`` entry points."""
