"""Terminal-Bench's test step, run INSIDE the sandbox (standard library only) as ``.tbench/check.py``.

It runs the task's ``run-tests.sh`` with ``$TEST_DIR`` the task's tests (copied into ``.tbench/tests``, as
Terminal-Bench copies them into the container at test time) and grades as Terminal-Bench's pytest parser does: the
lines of pytest's ``short test summary info`` (``PASSED test``, ``FAILED test - ...``) are the results, and the
task passes when there is at least one and every one passed. Output without such a summary is graded by the
script's exit status. It prints one JSON line ``{"success", "reason", "score"}``.
"""

import json
import os
import subprocess
import sys

_STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
_TAIL = 400


def parse_pytest(output):
    """{test: status} from pytest's short test summary, as Terminal-Bench's PytestParser reads it."""
    results = {}
    in_summary = False
    for line in output.splitlines():
        if "short test summary info" in line:
            in_summary = True
            continue
        if in_summary:
            parts = line.split(" ", 1)
            if parts[0] in _STATUSES and len(parts) == 2:
                results[parts[1].split(" - ")[0].strip()] = parts[0]
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
    if results:
        passed = [test for test, status in results.items() if status in ("PASSED", "XFAIL")]
        failed = [test for test in results if test not in passed]
        reason = f"{len(passed)}/{len(results)} tests passed"
        if failed:
            reason += f"; failed: {', '.join(failed[:10])}"
        print(json.dumps({"success": not failed, "reason": reason, "score": len(passed) / len(results)}))
        return
    tail = output.strip()[-_TAIL:]
    print(json.dumps({"success": done.returncode == 0,
                      "reason": f"run-tests.sh exited {done.returncode} (no pytest summary): {tail}"}))


if __name__ == "__main__":
    main()
