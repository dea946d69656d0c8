#!/bin/sh
# Terminal-Bench's run-tests.sh installs pytest and runs "pytest $TEST_DIR/test_outputs.py -rA". The fixture's image
# (the runtime image) has no pytest, so this runs the test functions with python3 and prints pytest's summary lines.
cd "$TEST_DIR" && python3 - <<'PY'
import traceback
import test_outputs

results = []
for name in sorted(n for n in dir(test_outputs) if n.startswith("test_")):
    try:
        getattr(test_outputs, name)()
        results.append(("PASSED", name, ""))
    except Exception as exc:
        results.append(("FAILED", name, f" - {type(exc).__name__}: {exc}"))
print("=========================== short test summary info ============================")
for status, name, why in results:
    print(f"{status} test_outputs.py::{name}{why}")
PY
