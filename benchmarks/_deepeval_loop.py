"""DeepEval's ExactMatchMetric ``measure()`` in a bare loop over the embedded benchmark's rows, for the side-by-side
figure of ``embedded_evaluate.py`` (issue 10: evaluate() at least five times this loop).

    python benchmarks/_deepeval_loop.py [ROWS]

Run by the interpreter of an environment that has deepeval (it is no dependency of this project, and the benchmark
installs nothing): ``embedded_evaluate.py --deepeval-python PATH`` runs it so. Prints one JSON line: the calls, wall
and CPU seconds of the loop. Test cases are built before the clock starts; the per-call progress indicator (a rich
``Live`` display started and stopped around every call: many times the call's own CPU) is off, and so is DeepEval's
telemetry (network calls to its collector), so the comparison is with its evaluation alone.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # before deepeval is imported: it reads it then

from _rows import benchmark_rows
from deepeval.metrics import ExactMatchMetric
from deepeval.test_case import LLMTestCase


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    metric = ExactMatchMetric()
    cases = [LLMTestCase(input=r["input"], actual_output=r["output"], expected_output=r["reference"])
             for r in benchmark_rows(count)]
    for case in cases[:100]:  # first-call costs out of the figure, as evaluate()'s warm-up does
        metric.measure(case, _show_indicator=False)
    wall, cpu = time.perf_counter(), time.process_time()
    for case in cases:
        metric.measure(case, _show_indicator=False)
    print(json.dumps({"calls": len(cases), "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}))


if __name__ == "__main__":
    main()
