"""Code-evaluation throughput of the code pack embedded: records graded per second by builtin/unit-tests (one
sandbox session, the harness and one child per test) and by builtin/code-exec-tests, on the in-process ladder.

    .venv/bin/python benchmarks/code_pack.py [--records 48] [--concurrency 16]

Prints records/s and test executions/s beside the issue's target (>= 40 executions/s of a 20-line Python test with
bubblewrap), with CPU seconds (this process and its children as getrusage sees them: the processes inside the
sandbox are not among them, so this is the host side's cost) and the load average: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from evalsi.sdk import evaluate

TARGET_PER_S = 40.0
# A 20-line program and one test of it, as the figure names.
PROGRAM = "\n".join([
    "def fizzbuzz(n):",
    "    out = []",
    "    for i in range(1, n + 1):",
    "        if i % 15 == 0:",
    "            out.append('FizzBuzz')",
    "        elif i % 3 == 0:",
    "            out.append('Fizz')",
    "        elif i % 5 == 0:",
    "            out.append('Buzz')",
    "        else:",
    "            out.append(str(i))",
    "    return out",
    "",
    "",
    "if __name__ == '__main__':",
    "    n = int(input())",
    "    print(' '.join(fizzbuzz(n)))",
    "",
    "",
    "",
]) + "\n"
TESTS = "def test_fizzbuzz():\n    assert fizzbuzz(15)[-1] == 'FizzBuzz'\n"
CASES = [{"input": "5\n", "output": "1 2 Fizz 4 Buzz\n"}]


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(evaluator: str, records: int, concurrency: int) -> None:
    rows = [{"id": f"r{i}", "output": PROGRAM, "reference": TESTS, "cases": CASES} for i in range(records)]
    params = {"code-exec-tests": {"cases_field": "cases"}} if evaluator == "code-exec-tests" else {}
    cpu, started = _cpu(), time.perf_counter()
    results = evaluate(rows, [evaluator], params=params, concurrency=concurrency)
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu
    passed = results.summaries[f"{evaluator}.passed"]
    assert passed.n == records and passed.mean == 1.0, (passed.n, passed.mean)
    rate = records / wall
    print(f"{evaluator}: {records} records in {wall:.2f}s wall = {rate:.1f} executions/s (target >= "
          f"{TARGET_PER_S:g}/s: {'met' if rate >= TARGET_PER_S else 'not met'}); CPU {cpu:.2f}s "
          f"({cpu / records * 1000:.0f} ms a record); load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    evaluate([{"id": "warm", "output": PROGRAM, "reference": TESTS}], ["unit-tests"])  # probe the ladder once
    for evaluator in ("unit-tests", "code-exec-tests"):
        measure(evaluator, args.records, args.concurrency)


if __name__ == "__main__":
    main()
