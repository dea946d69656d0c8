#!/bin/bash
# Harbor runs this as /tests/test.sh after the agent; the reward it writes to /logs/verifier is the task's grade.
# Terminal-Bench 2.0's scripts install pytest with uv here; this fixture's image (the runtime image) has no
# pytest and no network, so the checks are plain python3.
mkdir -p /logs/verifier
if python3 /tests/test_outputs.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
