"""Make the SWE-bench example: a local git repository repos/evals__calc (calc/ committed as its base commit; sub() is
wrong) and instances.jsonl, one instance per prediction (the gold patch, a wrong one). No network.

    python examples/benchmarks/swebench/make_instances.py
"""

import json
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE / "repos" / "evals__calc"
ENV = {"GIT_AUTHOR_NAME": "example", "GIT_AUTHOR_EMAIL": "example@example.com", "GIT_COMMITTER_NAME": "example",
       "GIT_COMMITTER_EMAIL": "example@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
       "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "PATH": "/usr/bin:/bin", "HOME": str(HERE)}


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True,
                          env=ENV).stdout


shutil.rmtree(REPO, ignore_errors=True)
shutil.copytree(HERE / "calc", REPO)
git("init", "-q")
git("add", ".")
git("commit", "-q", "-m", "base")
base = git("rev-parse", "HEAD").strip()
instance = {
    "repo": "evals/calc", "base_commit": base, "problem_statement": "sub(5, 3) returns 8; it should subtract.",
    "test_patch": (HERE / "test.patch").read_text(), "patch": (HERE / "gold.patch").read_text(),
    "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]),
    "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
}
predictions = {"evals__calc-1.gold": (HERE / "gold.patch").read_text(),
               "evals__calc-1.wrong": (HERE / "wrong.patch").read_text()}
with open(HERE / "instances.jsonl", "w") as out:
    for instance_id, model_patch in predictions.items():
        out.write(json.dumps({**instance, "instance_id": instance_id, "model_patch": model_patch}) + "\n")
print(f"repos/evals__calc at {base[:12]}; instances.jsonl: {', '.join(predictions)}")
