#!/bin/bash
# Grades in parts and writes them all to /logs/verifier/reward.json; "reward" is the task's grade.
python3 - <<'PY'
import json
from pathlib import Path

out = Path("/app/sum.txt")
exists = out.exists()
right = exists and out.read_text().strip() == "108"
Path("/logs/verifier/reward.json").write_text(json.dumps(
    {"reward": 1.0 if right else 0.0, "file_exists": int(exists), "sum_correct": int(right)}))
PY
