"""Terminal-Bench's test step, run INSIDE the sandbox (standard library only) as ``.tbench/check.py``.

It runs the task's ``run-tests.sh`` with ``$TEST_DIR`` the task's tests (copied into ``.tbench/tests``, as
Terminal-Bench copies them into the container at test time) and grades as Terminal-Bench's pytest parser does: the
lines after pytest's ``short test summary info`` are the results (``STATUS test`` with the ``- description`` of a
``FAILED`` line dropped; the test named by what follows its first ``::``); ``PASSED``, ``XFAIL`` and ``SKIPPED``
pass, ``FAILED``, ``XPASS`` and ``ERROR`` fail, and the task is resolved when every result passed. Output without
that summary is Terminal-Bench's parse error: not resolved. It prints one JSON line ``{"success", "reason",
"score"}``.
"""

import json
import os
import re
import subprocess
import sys

_SUMMARY = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
_PASSING = ("PASSED", "XFAIL", "SKIPPED")
_STATUSES = (*_PASSING, "FAILED", "XPASS", "ERROR")
_TAIL = 400


def parse_pytest(output):
    """{test: status} from pytest's short test summary, as Terminal-Bench's PytestParser reads it; None without
    a summary."""
    parts = _SUMMARY.split(output, maxsplit=1)
    if len(parts) < 2:
        return None
    results = {}
    for line in parts[1].splitlines():
        if line.startswith("FAILED") and " - " in line:
            line = line.rsplit(" - ", 1)[0]
        fields = line.split(maxsplit=1)
        if len(fields) < 2:
            continue
        status = fields[0].strip().strip(":")
        name = fields[1].strip().split("::", 1)[-1]
        if status in _STATUSES and name:
            results[name] = status
    return results


def main():
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 180.0
    env = {**os.environ, "TEST_DIR": os.path.abspath(".tbench/tests")}
    try:
        done = subprocess.run(["sh", ".tbench/run-tests.sh"], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        print(json.dumps({"success": False, "reason": f"run-tests.sh ran past {timeout:g}s"}))
        return
    output = done.stdout + done.stderr
    results = parse_pytest(output)
    if results is None:
        tail = output.strip()[-_TAIL:]
        print(json.dumps({"success": False, "reason": f"no short test summary info in run-tests.sh's output (exit "
                                                      f"{done.returncode}): {tail}"}))
        return
    passed = [test for test, status in results.items() if status in _PASSING]
    failed = [test for test in results if test not in passed]
    reason = f"{len(passed)}/{len(results)} tests passed"
    if failed:
        reason += f"; failed: {', '.join(failed[:10])}"
    print(json.dumps({"success": not failed, "reason": reason,
                      "score": len(passed) / len(results) if results else 1.0}))


if __name__ == "__main__":
    main()
